package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/sys/mountinfo"
)

// ProbePackage is the import path of the probe the suite builds.
const ProbePackage = "github.com/agentnode/agentnode/sdk/sandbox/sandboxtest/probe"

// goTool finds the go command that builds the probe.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if r := os.Getenv("GOROOT"); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// ForwarderPackage is the import path of the egress forwarder that sandbox
// images carry at profile.EgressForwarderPath.
const ForwarderPackage = "github.com/agentnode/agentnode/sdk/sandbox/forwarder"

// buildProbe builds the probe, statically and without local paths, to out.
func buildProbe(ctx context.Context, out string) error {
	return buildStatic(ctx, "the probe", ProbePackage, out)
}

// BuildForwarder builds the egress forwarder to out the way `make build`
// does (CGO_ENABLED=0, -trimpath, -buildvcs=false, -ldflags '-s -w'), for
// tests that build a sandbox image (cmd/agentnode/imagebuild.BuildOptions.ForwarderPath)
// or a rootfs of their own. It needs the go command.
func BuildForwarder(ctx context.Context, out string) error {
	return buildStatic(ctx, "the egress forwarder", ForwarderPackage, out)
}

// PrebuiltEnv names a directory holding the probe and the forwarder built
// by Prebuild: a test process re-executed as a normal user, which cannot
// build them outside the module (nor read the module cache), copies them
// from there instead.
const PrebuiltEnv = "AGENTNODE_TEST_PREBUILT"

// Prebuild builds the probe and the egress forwarder into dir, for a child
// test process given PrebuiltEnv=dir.
func Prebuild(ctx context.Context, dir string) error {
	if err := buildProbe(ctx, filepath.Join(dir, path.Base(ProbePackage))); err != nil {
		return err
	}
	return BuildForwarder(ctx, filepath.Join(dir, path.Base(ForwarderPackage)))
}

func buildStatic(ctx context.Context, what, pkg, out string) error {
	if dir := os.Getenv(PrebuiltEnv); dir != "" {
		return copyFile(filepath.Join(dir, path.Base(pkg)), out, 0o755)
	}
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("sandboxtest: building %s (%s): %w\n%s", what, strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return nil
}

// copyFile copies src to dst with mode perm.
func copyFile(src, dst string, perm os.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm&os.ModePerm)
	if err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("sandboxtest: %w", cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("sandboxtest: copying %s: %w", src, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// procStart returns the start time (field 22 of /proc/PID/stat, clock ticks
// after boot) of a host process.
func procStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", fmt.Errorf("sandboxtest: %w", err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("sandboxtest: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("sandboxtest: short /proc/%d/stat", pid)
	}
	return f[19], nil
}

// firstNameserver returns the first nameserver of /etc/resolv.conf, or "".
func firstNameserver() string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			return fields[1]
		}
	}
	return ""
}

// hostIPv4 returns the host's first global unicast IPv4 address, or "".
func hostIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip := n.IP.To4(); ip != nil && ip.IsGlobalUnicast() {
				return ip.String()
			}
		}
	}
	return ""
}

// countingListener accepts and closes connections, counting them: a
// connection from inside the sandbox is an escape even if the probe missed
// it.
type countingListener struct {
	l    net.Listener
	n    atomic.Int64
	done chan struct{}
}

func listen(network, addr string) (*countingListener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: listening on %s %s: %w", network, addr, err)
	}
	c := &countingListener{l: l, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			conn, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	return c, nil
}

func (c *countingListener) port() string {
	_, p, _ := net.SplitHostPort(c.l.Addr().String())
	return p
}

func (c *countingListener) close() {
	c.l.Close()
	<-c.done
}

// capBuffer keeps the first max bytes written to it and counts the rest.
// It never fails a write.
type capBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func newCapBuffer(max int) *capBuffer { return &capBuffer{max: max} }

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *capBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

// tail returns the last n bytes kept, for failure messages.
func (b *capBuffer) tail(n int) string {
	kept := b.bytes()
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	return strings.TrimSpace(string(kept))
}

// errCut is what cutWriter returns once it has had enough.
var errCut = errors.New("sandboxtest: output bound reached, refusing more")

// cutWriter accepts max bytes, then fails every write with errCut and
// records when it first did.
type cutWriter struct {
	mu    sync.Mutex
	max   int64
	n     int64
	cutAt time.Time
}

func (w *cutWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n+int64(len(p)) > w.max {
		k := w.max - w.n
		w.n = w.max
		if w.cutAt.IsZero() {
			w.cutAt = time.Now()
		}
		return int(k), errCut
	}
	w.n += int64(len(p))
	return len(p), nil
}

func (w *cutWriter) cut() (time.Time, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cutAt, w.n
}

// patternByte is byte i of the probe's pattern helper (a copy of the probe's
// function; a test keeps them equal).
func patternByte(i int64) byte { return byte((i*7 + i/251) % 251) }

// patternWriter checks a stream against the pattern as it arrives.
type patternWriter struct {
	mu       sync.Mutex
	n        int64
	mismatch int64 // offset of the first wrong byte, or -1
}

func (w *patternWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range p {
		if w.mismatch < 0 && c != patternByte(w.n+int64(i)) {
			w.mismatch = w.n + int64(i)
		}
	}
	w.n += int64(len(p))
	return len(p), nil
}

// patternReader produces n bytes of the pattern.
type patternReader struct{ off, n int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n-r.off)
	for i := int64(0); i < k; i++ {
		p[i] = patternByte(r.off + i)
	}
	r.off += k
	return int(k), nil
}

// probeProcesses lists host processes running the probe binaries (matched
// by file identity, so it sees through bind mounts and pid namespaces).
// Processes the suite may not inspect are not seen.
func probeProcesses(bins []os.FileInfo) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name() + "/exe")
		if err != nil {
			continue
		}
		for _, b := range bins {
			if b != nil && os.SameFile(fi, b) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// hostMounts returns the mounts of the host's (this process's) mount table
// whose root or mount point mentions one of paths, as a set of "id root
// point".
func hostMounts(paths ...string) map[string]bool {
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil
	}
	set := map[string]bool{}
	for _, m := range ms {
		for _, p := range paths {
			if p != "" && (strings.Contains(m.Root, p) || strings.Contains(m.Mountpoint, p)) {
				set[fmt.Sprintf("%d %s %s", m.ID, m.Root, m.Mountpoint)] = true
			}
		}
	}
	return set
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupsNamed lists cgroup directories whose name contains id, in every
// hierarchy (backends commonly name a run's cgroup after its RunID; one
// named otherwise is not found).
func cgroupsNamed(id string) []string {
	var found []string
	_ = filepath.WalkDir(cgroupRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // vanished, unreadable, or a control file
		}
		if p != cgroupRoot && namesRun(d.Name(), id) {
			found = append(found, p)
			return fs.SkipDir
		}
		if strings.Count(strings.TrimPrefix(p, cgroupRoot), "/") >= 6 {
			return fs.SkipDir
		}
		return nil
	})
	return found
}

// namesRun reports whether a cgroup directory name contains id as a whole
// (run 1's id is a prefix of run 12's).
func namesRun(name, id string) bool {
	for off := 0; ; {
		i := strings.Index(name[off:], id)
		if i < 0 {
			return false
		}
		end := off + i + len(id)
		if end == len(name) || name[end] < '0' || name[end] > '9' {
			return true
		}
		off = end
	}
}

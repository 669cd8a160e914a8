// Command hostmeta is the attacker of test/attack/host_metadata.txtar: a
// curated tool on the host that goes for what Landlock does not mediate —
// the mode, owner, timestamps, extended attributes and inode flags of files
// it can name, the resource limits of an unrelated process, and the file
// size limit of agentnode, its parent — with the attacks of
// executor/confine/confinetest/metaattack. The same binary sets up and
// inspects the targets:
//
//	hostmeta victim DIR      plant DIR/bin (0755) and DIR/secret (0600), each
//	                         with the xattr user.agentnode=keep, write the
//	                         tool's input naming them and this process (the
//	                         unrelated one) to DIR/input.json and a tool
//	                         request for a direct run to DIR/request.json,
//	                         then wait to be killed
//	hostmeta await DIR       wait until DIR/input.json is there
//	hostmeta state DIR [F…]  print the state of the targets (and of the files
//	                         F) and the victim's resource limits
//	hostmeta                 the tool: read a tool request on stdin, attack,
//	                         answer {"ok":true,"result":"…"}
//
// The result has one word per attack, ATTACK@TARGET:OUTCOME, where OUTCOME
// is EPERM, ESCAPED, or other_ERROR for anything else, then legit:ok when
// writing and touching a file in its work dir still works.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/executor/confine/confinetest/metaattack"
)

// input is the tool's input. Guard refuses absolute paths in a tool's
// input, so it names the targets' directory relative to the script's work
// dir, which the tool finds five levels above its package
// (AGENTNODE_HOME/packages/hostmeta/content, AGENTNODE_HOME being
// $WORK/user/.agentnode) — a tool can name any path it likes.
type input struct {
	Dir string `json:"dir"`
	// Pid is the unrelated process.
	Pid int `json:"pid"`
	// Parent: attack the parent's limits too (false for the direct
	// control run, whose parent is the test itself).
	Parent bool `json:"parent"`
}

// The attacks by what they need: a path, a descriptor the tool can open
// (its package's data.txt), a pid.
var (
	pathAttacks = []string{
		"chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat",
		"utime", "utimes", "futimesat", "utimensat", "utimensat_now",
		"setxattr", "lsetxattr", "setxattrat", "removexattr", "lremovexattr", "removexattrat",
		"file_setattr",
	}
	fdAttacks  = []string{"fchmod", "fchown", "futimens", "fsetxattr", "fremovexattr", "chattr"}
	pidAttacks = []string{"prlimit_cpu", "prlimit_nofile", "prlimit_read"}
)

func main() {
	var err error
	switch {
	case len(os.Args) == 1:
		err = tool()
	case len(os.Args) == 3 && os.Args[1] == "victim":
		err = victim(os.Args[2])
	case len(os.Args) == 3 && os.Args[1] == "await":
		for {
			if _, err := os.Stat(filepath.Join(os.Args[2], "input.json")); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	case len(os.Args) >= 3 && os.Args[1] == "state":
		err = state(os.Args[2], os.Args[3:])
	default:
		err = errors.New("usage: hostmeta [victim DIR | await DIR | state DIR [FILE...]]")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostmeta:", err)
		os.Exit(2)
	}
}

// targets are the bin and secret of in, from base.
func (in input) targets(base string) (bin, secret string) {
	d := filepath.Join(base, in.Dir)
	return filepath.Join(d, "bin"), filepath.Join(d, "secret")
}

// victim plants the targets in dir, a directory of the script's work dir.
func victim(dir string) error {
	in := input{Dir: filepath.Base(dir), Pid: os.Getpid(), Parent: true}
	bin, secret := in.targets(filepath.Dir(dir))
	for path, mode := range map[string]os.FileMode{bin: 0o755, secret: 0o600} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho victim\n"), mode); err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
		if err := unix.Setxattr(path, metaattack.Name, []byte("keep"), 0); err != nil {
			return fmt.Errorf("plant the xattr: %w", err)
		}
	}
	direct := in
	direct.Parent = false
	req, err := json.Marshal(map[string]any{"tool": "attack", "input": direct})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "request.json"), append(req, '\n'), 0o644); err != nil {
		return err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	// input.json last, renamed into place: await sees all or nothing.
	tmp := filepath.Join(dir, "input.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "input.json")); err != nil {
		return err
	}
	// Until the script ends and interrupts it.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, unix.SIGTERM)
	<-stop
	return nil
}

func state(dir string, extra []string) error {
	b, err := os.ReadFile(filepath.Join(dir, "input.json"))
	if err != nil {
		return err
	}
	var in input
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	bin, secret := in.targets(filepath.Dir(dir))
	for _, p := range append([]string{bin, secret}, extra...) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return err
		}
		buf := make([]byte, 64)
		xattr := "none"
		if n, err := unix.Getxattr(p, metaattack.Name, buf); err == nil {
			xattr = string(buf[:n])
		}
		flags := "?"
		if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			if f, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil {
				flags = fmt.Sprintf("%#x", f)
			}
			unix.Close(fd)
		}
		fmt.Printf("%s mode=%o uid=%d gid=%d mtime=%d.%d ctime=%d.%d xattr=%s flags=%s\n", filepath.Base(p),
			st.Mode, st.Uid, st.Gid, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, xattr, flags)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", in.Pid))
	if err != nil {
		return err
	}
	fmt.Print(string(limits))
	return nil
}

func tool() error {
	line, err := bufio.NewReader(os.Stdin).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return err
	}
	var req struct {
		Input input `json:"input"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return err
	}
	in := req.Input
	base := "." // the direct run starts in the work dir
	if pack := os.Getenv("PACK_DIR"); pack != "" {
		base = filepath.Join(pack, "../../../../..")
	}
	bin, secret := in.targets(base)
	var words []string
	try := func(attack, label, param string) {
		err := metaattack.Checks[attack](param)
		var en unix.Errno
		switch {
		case err == nil:
			words = append(words, attack+"@"+label+":ESCAPED")
		case errors.Is(err, unix.EPERM):
			words = append(words, attack+"@"+label+":EPERM")
		case errors.As(err, &en):
			words = append(words, attack+"@"+label+":other_"+unix.ErrnoName(en))
		default:
			words = append(words, attack+"@"+label+":other_"+strings.ReplaceAll(err.Error(), " ", "_"))
		}
	}
	for _, a := range pathAttacks {
		if _, ok := metaattack.Checks[a]; !ok {
			continue // not a call of this architecture
		}
		try(a, "bin", bin)
		try(a, "secret", secret)
	}
	// A descriptor the tool can open: its package's data.txt confined,
	// the secret in the direct run.
	fdTarget, fdLabel := filepath.Join(os.Getenv("PACK_DIR"), "data.txt"), "package"
	if os.Getenv("PACK_DIR") == "" {
		fdTarget, fdLabel = secret, "secret"
	}
	for _, a := range fdAttacks {
		try(a, fdLabel, fdTarget)
	}
	for _, a := range pidAttacks {
		try(a, "victim", strconv.Itoa(in.Pid))
	}
	if in.Parent {
		try("prlimit_fsize", "parent", "ppid")
		try("prlimit_read", "parent", "ppid")
	}
	sort.Strings(words)
	legit := "legit:ok"
	scratch := filepath.Join(os.TempDir(), "hostmeta-scratch")
	if err := os.WriteFile(scratch, []byte("data"), 0o600); err != nil {
		legit = "legit:write_" + err.Error()
	} else if err := metaattack.Checks["futimens_now"](scratch); err != nil {
		legit = "legit:touch_" + err.Error()
	}
	_ = os.Remove(scratch)
	out, err := json.Marshal(map[string]any{"ok": true, "result": strings.Join(append(words, legit), " ")})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
	"github.com/agentnode/agentnode/sdk/sandbox/reaper"
)

// MinAPIVersion is the oldest Engine API the backend accepts: 1.41 (Docker
// 20.10) is the first with HostConfig.CgroupnsMode, which the profile's
// cgroup namespace needs.
const MinAPIVersion = "1.41"

// errAPITooOld marks an engine older than MinAPIVersion.
var errAPITooOld = errors.New("engine API too old")

// dialTimeout bounds the availability probe's connect to the socket.
const dialTimeout = 5 * time.Second

// defaultDockerdPaths are where a dockerd binary is looked for when the
// socket is missing (the plugin has no PATH), to tell "not installed" from
// "installed but not running".
var defaultDockerdPaths = []string{"/usr/bin/dockerd", "/usr/sbin/dockerd", "/usr/local/bin/dockerd", "/usr/local/sbin/dockerd", "/snap/bin/docker"}

// backend implements sandbox.Backend with the Docker Engine API.
type backend struct {
	log          hclog.Logger
	ep           endpoint
	epErr        error    // a bad host file: every call fails
	owner        string   // ownerLabel value: this process
	dockerdPaths []string // replaced in tests
	// reaper kills and removes a run's container should this process die
	// mid-run, or hang past the run's deadline (sdk/sandbox/reaper).
	reaper *reaper.Reaper

	mu  sync.Mutex
	cli *client.Client
	// negotiated: the API version was agreed with the engine and is at
	// least MinAPIVersion.
	negotiated bool
}

var _ sandbox.Backend = (*backend)(nil)

// newBackend returns a backend for ep (epErr: why there is none).
func newBackend(log hclog.Logger, ep endpoint, epErr error) *backend {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	b := &backend{log: log, ep: ep, epErr: epErr, dockerdPaths: defaultDockerdPaths, reaper: reaper.New()}
	if id, err := processOwner(os.Getpid()); err == nil {
		b.owner = id
	}
	return b
}

// client returns the engine client, negotiating the API version on first
// use (the engine must speak MinAPIVersion or later).
func (b *backend) client(ctx context.Context) (*client.Client, error) {
	if b.epErr != nil {
		return nil, fmt.Errorf("docker: %w", b.epErr)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cli == nil {
		cli, err := client.New(client.WithHost(b.ep.host))
		if err != nil {
			return nil, fmt.Errorf("docker: client for %s: %w", b.ep.host, err)
		}
		b.cli = cli
	}
	if !b.negotiated {
		p, err := b.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		switch {
		case p.APIVersion != "" && versions.LessThan(p.APIVersion, MinAPIVersion):
			return nil, fmt.Errorf("docker: the engine at %s speaks API %s, the sandbox needs %s or later (Docker 20.10+): %w", b.ep.host, p.APIVersion, MinAPIVersion, errAPITooOld)
		case err != nil:
			return nil, fmt.Errorf("docker: engine at %s: %w", b.ep.host, err)
		case p.APIVersion == "":
			return nil, fmt.Errorf("docker: the engine at %s does not say which API it speaks, the sandbox needs %s or later: %w", b.ep.host, MinAPIVersion, errAPITooOld)
		}
		b.negotiated = true
	}
	return b.cli, nil
}

// close releases idle connections.
func (b *backend) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cli != nil {
		_ = b.cli.Close()
	}
}

// --- availability ---

// Availability reports whether the engine can run req.Image now: the socket
// exists and accepts us, the engine speaks API MinAPIVersion or later, can
// enforce the profile (seccomp, memory+swap, pids and CPU limits, Linux on
// x86_64), and has the image.
func (b *backend) Availability(ctx context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	if req == nil {
		return nil, errors.New("docker: nil AvailabilityRequest")
	}
	if b.epErr != nil {
		return nil, fmt.Errorf("docker: %w", b.epErr)
	}
	no := func(reason, format string, args ...any) (*sandbox.AvailabilityResponse, error) {
		return &sandbox.AvailabilityResponse{Reason: reason, Detail: fmt.Sprintf(format, args...)}, nil
	}
	if runtime.GOARCH != "amd64" {
		return no(sandbox.ReasonIncompatible, "the sandbox profile's seccomp filter is for x86_64 only, not %s", runtime.GOARCH)
	}
	if reason, detail := b.probeSocket(ctx); reason != "" {
		return no(reason, "%s", detail)
	}

	cli, err := b.client(ctx)
	if err == nil {
		// The version was negotiated once (renegotiating would race with
		// runs in flight); the engine behind the socket may have been
		// replaced since.
		var p client.PingResult
		p, err = cli.Ping(ctx, client.PingOptions{})
		if err == nil && (p.APIVersion == "" || versions.LessThan(p.APIVersion, MinAPIVersion)) {
			err = fmt.Errorf("docker: the engine at %s speaks API %q, the sandbox needs %s or later (Docker 20.10+): %w", b.ep.host, p.APIVersion, MinAPIVersion, errAPITooOld)
		}
	}
	if err != nil {
		if errors.Is(err, errAPITooOld) {
			return no(sandbox.ReasonIncompatible, "%v", err)
		}
		if cerrdefs.IsPermissionDenied(err) || cerrdefs.IsUnauthorized(err) {
			return no(sandbox.ReasonNotPermitted, "%v", err)
		}
		return no(sandbox.ReasonNotRunning, "%v", err)
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		if cerrdefs.IsPermissionDenied(err) || cerrdefs.IsUnauthorized(err) {
			return no(sandbox.ReasonNotPermitted, "docker info: %v", err)
		}
		return no(sandbox.ReasonNotRunning, "docker info: %v", err)
	}
	if detail := engineProblem(&info.Info); detail != "" {
		return no(sandbox.ReasonIncompatible, "%s", detail)
	}
	rt, err := sandbox.NormalizeRuntime(req.Runtime)
	if err != nil {
		return no(sandbox.ReasonRuntimeMissing, "%v", err)
	}
	if detail := gvisorProblem(&info.Info); rt == sandbox.RuntimeGVisor && detail != "" {
		return no(sandbox.ReasonRuntimeMissing, "%s", detail)
	}

	if req.Image == "" {
		return &sandbox.AvailabilityResponse{Available: true, Runtime: rt, Detail: "engine " + info.Info.ServerVersion + " at " + b.ep.host + "; no image asked about"}, nil
	}
	ref, detail, err := b.findImage(ctx, cli, req.Image)
	switch {
	case err != nil && (cerrdefs.IsPermissionDenied(err) || cerrdefs.IsUnauthorized(err)):
		return no(sandbox.ReasonNotPermitted, "image inspect: %v", err)
	case err != nil:
		return nil, fmt.Errorf("docker: image %s: %w", req.Image, err)
	case ref == "":
		return no(sandbox.ReasonImageMissing, "%s", detail)
	}
	return &sandbox.AvailabilityResponse{Available: true, Runtime: rt, Detail: fmt.Sprintf("engine %s at %s; %s", info.Info.ServerVersion, b.ep.host, detail)}, nil
}

// GVisorRuntime is the name under which dockerd must register gVisor's
// runsc for sandbox.runtime gvisor, with the runtime arguments
// GVisorRuntimeArgs (daemon.json: "runtimes": {"runsc": {"path":
// "/usr/bin/runsc", "runtimeArgs": [...]}}).
const GVisorRuntime = "runsc"

// GVisorRuntimeArgs are the runsc flags the registration must carry:
// runsc's own network stack off (loopback only, as NetworkMode none asks;
// runsc refuses the container without it), the profile's seccomp filter
// installed inside gVisor too, and the sealed egress socket (a
// bind-mounted host socket) connectable.
var GVisorRuntimeArgs = []string{"--network=none", "--oci-seccomp", "--host-uds=open"}

// gvisorProblem says why the engine cannot run gVisor as the sandbox
// needs it, or "".
func gvisorProblem(info *system.Info) string {
	r, ok := info.Runtimes[GVisorRuntime]
	switch {
	case !ok:
		return fmt.Sprintf("the engine has no runtime %q (gVisor): register runsc in daemon.json as \"runtimes\": {%q: {\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": %q}}",
			GVisorRuntime, GVisorRuntime, GVisorRuntimeArgs)
	case filepath.Base(r.Path) != "runsc":
		return fmt.Sprintf("the engine's runtime %q is %q, not gVisor's runsc", GVisorRuntime, r.Path)
	}
	for _, a := range GVisorRuntimeArgs {
		if !slices.Contains(r.Args, a) {
			return fmt.Sprintf("the engine's runtime %q (%s) lacks the runtime argument %s (it has %q)", GVisorRuntime, r.Path, a, r.Args)
		}
	}
	return ""
}

// SupportsRuntime: Docker runs gVisor through the engine's runtime
// GVisorRuntime; Availability says whether the engine has it.
func (b *backend) SupportsRuntime(rt string) bool {
	return rt == sandbox.RuntimeNative || rt == sandbox.RuntimeGVisor
}

// probeSocket tells apart a missing socket (not installed, or installed but
// not running), a refused connection (not running) and a denied one (not
// permitted), which the engine client reports alike.
func (b *backend) probeSocket(ctx context.Context) (reason, detail string) {
	fi, err := os.Stat(b.ep.socket)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if d := b.dockerdInstalled(); d != "" {
			return sandbox.ReasonNotRunning, fmt.Sprintf("the engine socket %s does not exist (%s); dockerd is installed at %s but not running", b.ep.socket, b.ep.source, d)
		}
		return sandbox.ReasonNotInstalled, fmt.Sprintf("the engine socket %s does not exist (%s) and no dockerd is installed", b.ep.socket, b.ep.source)
	case errors.Is(err, fs.ErrPermission):
		return sandbox.ReasonNotPermitted, fmt.Sprintf("the engine socket %s: %v", b.ep.socket, err)
	case err != nil:
		return sandbox.ReasonNotRunning, fmt.Sprintf("the engine socket %s: %v", b.ep.socket, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return sandbox.ReasonNotRunning, fmt.Sprintf("%s is not a socket", b.ep.socket)
	}
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "unix", b.ep.socket)
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		return sandbox.ReasonNotPermitted, fmt.Sprintf("permission denied connecting to the engine socket %s (uid %d; root or the docker group is needed)", b.ep.socket, os.Geteuid())
	case errors.Is(err, syscall.ECONNREFUSED):
		return sandbox.ReasonNotRunning, fmt.Sprintf("the engine socket %s refuses connections: dockerd is not running", b.ep.socket)
	case err != nil:
		return sandbox.ReasonNotRunning, fmt.Sprintf("connecting to the engine socket %s: %v", b.ep.socket, err)
	}
	_ = conn.Close()
	return "", ""
}

func (b *backend) dockerdInstalled() string {
	for _, p := range b.dockerdPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// engineProblem says why this engine cannot enforce the profile, or "".
func engineProblem(info *system.Info) string {
	var missing []string
	if !info.MemoryLimit {
		missing = append(missing, "memory limits")
	}
	if !info.SwapLimit {
		// memory+swap = memory cannot be set: the memory ceiling would
		// not hold (AgentNode's memory_ceiling_unenforceable).
		missing = append(missing, "swap limits (memory+swap)")
	}
	if !info.PidsLimit {
		missing = append(missing, "pids limits")
	}
	if !info.CPUCfsQuota || !info.CPUCfsPeriod {
		missing = append(missing, "CFS CPU quota")
	}
	if !slices.ContainsFunc(info.SecurityOptions, func(o string) bool { return strings.HasPrefix(o, "name=seccomp") }) {
		missing = append(missing, "seccomp")
	}
	switch {
	case info.OSType != "linux":
		return fmt.Sprintf("the engine runs %s containers, the sandbox needs linux", info.OSType)
	case info.Architecture != "x86_64":
		return fmt.Sprintf("the engine runs on %s, the sandbox profile's seccomp filter is for x86_64 only", info.Architecture)
	case len(missing) > 0:
		return fmt.Sprintf("the engine cannot enforce %s (rootless on cgroup v1, or the kernel lacks them)", strings.Join(missing, ", "))
	}
	return ""
}

// findImage looks for the image: by the pinned reference itself (an image
// pulled by digest, or an image ID), then by the tag `agentnode sandbox
// build` loads it under (name:<first 12 hex digits of the manifest
// digest>), because a loaded image has no repository digest. It returns
// the reference that matched, or "" and why nothing did.
//
// Availability can only ask about req.Image: the AvailabilityRequest
// carries no image ID. Run never uses these names: it runs the ID (config
// digest) the host verified, so an image found here under a tag that points
// elsewhere makes Run fail, never run something else.
func (b *backend) findImage(ctx context.Context, cli *client.Client, ref string) (found, detail string, err error) {
	candidates := []string{ref}
	if tag := imageload.Tag(ref); tag != "" {
		candidates = append(candidates, tag)
	}
	for _, c := range candidates {
		img, err := cli.ImageInspect(ctx, c)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		if img.Os != "linux" || img.Architecture != "amd64" {
			return "", fmt.Sprintf("image %s is %s/%s, the sandbox needs linux/amd64", c, img.Os, img.Architecture), nil
		}
		return c, fmt.Sprintf("image %s present as %s (id %s)", ref, c, img.ID), nil
	}
	return "", fmt.Sprintf("image %s is not in the engine (looked for %s); run `agentnode sandbox build` to load it", ref, strings.Join(candidates, ", ")), nil
}

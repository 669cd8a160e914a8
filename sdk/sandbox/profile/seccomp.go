package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	agentspecs "github.com/agentnode/agentnode/specs"
)

// seccompFile is the seccomp profile's path inside specs.Seccomp.
const seccompFile = "seccomp/agentnode.json"

// seccompArch is the libseccomp name of the one architecture the profile
// serves, as Docker's includes/excludes "arches" spell it.
const seccompArch = "amd64"

// seccompDockerJSON is the embedded profile, read once.
var seccompDockerJSON = mustRead(agentspecs.Seccomp, seccompFile)

// SeccompDockerJSON returns the sandbox's seccomp profile as stored: Docker's
// profile format, which `docker run --security-opt seccomp=FILE`, the Docker
// API's SecurityOpt "seccomp=<json>" and `podman run --security-opt
// seccomp=FILE` accept. It covers x86_64 only. The result is a fresh copy.
func SeccompDockerJSON() []byte {
	return bytes.Clone(seccompDockerJSON)
}

// Seccomp returns the sandbox's seccomp profile as the runtime-spec's
// LinuxSeccomp (what runc and libcontainer's specconv take), converted from
// the Docker-format file with Docker's semantics for a container with no
// capabilities on x86_64. The result is a fresh deep copy.
func Seccomp() (*specs.LinuxSeccomp, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("profile: the seccomp profile covers x86_64 only, not %s", runtime.GOARCH)
	}
	sc, err := parsedSeccomp()
	if err != nil {
		return nil, err
	}
	return cloneSeccomp(sc), nil
}

var parsedSeccomp = sync.OnceValues(func() (*specs.LinuxSeccomp, error) {
	sc, err := parseDockerSeccomp(seccompDockerJSON)
	if err != nil {
		return nil, fmt.Errorf("profile: specs/%s: %w", seccompFile, err)
	}
	return sc, nil
})

// dockerSeccomp is Docker's seccomp profile format (moby/profiles
// seccomp.Seccomp; Podman's containers/common uses the same one).
type dockerSeccomp struct {
	DefaultAction    specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet  *uint                    `json:"defaultErrnoRet,omitempty"`
	Architectures    []specs.Arch             `json:"architectures,omitempty"`
	ArchMap          []dockerArch             `json:"archMap,omitempty"`
	Flags            []specs.LinuxSeccompFlag `json:"flags,omitempty"`
	ListenerPath     string                   `json:"listenerPath,omitempty"`
	ListenerMetadata string                   `json:"listenerMetadata,omitempty"`
	Syscalls         []dockerSyscall          `json:"syscalls"`
}

// dockerArch is one archMap entry: an architecture and the
// sub-architectures a filter for it also covers.
type dockerArch struct {
	Arch      specs.Arch   `json:"architecture"`
	SubArches []specs.Arch `json:"subArchitectures"`
}

// dockerSyscall is one rule. Includes and Excludes make it conditional on
// the architecture, the container's capabilities or the kernel version.
type dockerSyscall struct {
	Names    []string                 `json:"names,omitempty"`
	Name     string                   `json:"name,omitempty"` // Docker's deprecated single-name form
	Action   specs.LinuxSeccompAction `json:"action"`
	ErrnoRet *uint                    `json:"errnoRet,omitempty"`
	Args     []specs.LinuxSeccompArg  `json:"args,omitempty"`
	Comment  string                   `json:"comment,omitempty"`
	Includes *dockerFilter            `json:"includes,omitempty"`
	Excludes *dockerFilter            `json:"excludes,omitempty"`
}

// dockerFilter is a rule's condition.
type dockerFilter struct {
	Caps      []string        `json:"caps,omitempty"`
	Arches    []string        `json:"arches,omitempty"`
	MinKernel json.RawMessage `json:"minKernel,omitempty"`
}

// Actions a rule or the default may take. SCMP_ACT_LOG and SCMP_ACT_TRACE
// let the call through (or hand it to a tracer) and SCMP_ACT_NOTIFY hands
// the decision to an agent outside the profile: none belongs in it.
var seccompActions = []specs.LinuxSeccompAction{
	specs.ActAllow, specs.ActErrno, specs.ActKill, specs.ActKillThread, specs.ActKillProcess, specs.ActTrap,
}

// seccompOperators are the comparison operators libseccomp knows.
var seccompOperators = []specs.LinuxSeccompOperator{
	specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual, specs.OpEqualTo,
	specs.OpGreaterEqual, specs.OpGreaterThan, specs.OpMaskedEqual,
}

// parseDockerSeccomp decodes a Docker-format profile strictly (unknown
// fields are errors, so a misspelt key cannot silently drop a rule) and
// converts it the way Docker's setupSeccomp does for a container on x86_64
// with an empty capability bounding set:
//   - "architectures" is taken as is; an "archMap" contributes its x86_64
//     entry and that entry's sub-architectures;
//   - a rule whose excludes name amd64 is dropped; excludes.caps never
//     apply (the container holds no capability);
//   - a rule whose includes name architectures without amd64, or any
//     capability, is dropped.
//
// Kernel-version conditions (minKernel) are refused rather than evaluated:
// the profile must not depend on the host it is loaded on. So are seccomp
// notify listeners and the actions in no seccompActions.
func parseDockerSeccomp(data []byte) (*specs.LinuxSeccomp, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p dockerSeccomp
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode: data after the profile")
	}

	if !slices.Contains(seccompActions, p.DefaultAction) {
		return nil, fmt.Errorf("defaultAction: %q is not allowed", p.DefaultAction)
	}
	if p.DefaultAction == specs.ActAllow {
		return nil, errors.New("defaultAction: SCMP_ACT_ALLOW: the profile must be an allowlist")
	}
	if p.DefaultErrnoRet != nil && p.DefaultAction != specs.ActErrno {
		return nil, errors.New("defaultErrnoRet: only valid with defaultAction SCMP_ACT_ERRNO")
	}
	if p.ListenerPath != "" || p.ListenerMetadata != "" {
		return nil, errors.New("listenerPath: seccomp notify agents are not part of the profile")
	}
	if len(p.Architectures) > 0 && len(p.ArchMap) > 0 {
		return nil, errors.New("both architectures and archMap are set; use one")
	}

	out := &specs.LinuxSeccomp{
		DefaultAction:   p.DefaultAction,
		DefaultErrnoRet: p.DefaultErrnoRet,
		Architectures:   slices.Clone(p.Architectures),
		Flags:           p.Flags,
	}
	for _, a := range p.ArchMap {
		if a.Arch == specs.ArchX86_64 {
			out.Architectures = append(append(out.Architectures, a.Arch), a.SubArches...)
			break
		}
	}
	if !slices.Contains(out.Architectures, specs.ArchX86_64) {
		return nil, errors.New("architectures: SCMP_ARCH_X86_64 is missing")
	}

	for i, r := range p.Syscalls {
		keep, err := r.applies()
		if err != nil {
			return nil, fmt.Errorf("syscalls[%d]: %w", i, err)
		}
		sc, err := r.toOCI()
		if err != nil {
			return nil, fmt.Errorf("syscalls[%d]: %w", i, err)
		}
		if keep {
			out.Syscalls = append(out.Syscalls, sc)
		}
	}
	if len(out.Syscalls) == 0 {
		return nil, errors.New("syscalls: no rule applies")
	}
	return out, nil
}

// applies evaluates the rule's includes and excludes for agentnode's
// container (x86_64, no capabilities).
func (r *dockerSyscall) applies() (bool, error) {
	for _, f := range []*dockerFilter{r.Includes, r.Excludes} {
		if f != nil && len(f.MinKernel) > 0 {
			return false, errors.New("minKernel: kernel-dependent rules are not supported")
		}
	}
	if e := r.Excludes; e != nil && slices.Contains(e.Arches, seccompArch) {
		return false, nil
	}
	if in := r.Includes; in != nil {
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, seccompArch) {
			return false, nil
		}
		if len(in.Caps) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// toOCI validates the rule and returns it as a runtime-spec rule.
func (r *dockerSyscall) toOCI() (specs.LinuxSyscall, error) {
	names := slices.Clone(r.Names)
	switch {
	case r.Name != "" && len(names) > 0:
		return specs.LinuxSyscall{}, errors.New("both name and names are set; use one")
	case r.Name != "":
		names = []string{r.Name}
	case len(names) == 0:
		return specs.LinuxSyscall{}, errors.New("names: empty")
	}
	for _, n := range names {
		if n == "" {
			return specs.LinuxSyscall{}, errors.New("names: empty name")
		}
	}
	if !slices.Contains(seccompActions, r.Action) {
		return specs.LinuxSyscall{}, fmt.Errorf("action: %q is not allowed", r.Action)
	}
	if r.ErrnoRet != nil && r.Action != specs.ActErrno {
		return specs.LinuxSyscall{}, errors.New("errnoRet: only valid with action SCMP_ACT_ERRNO")
	}
	for j, a := range r.Args {
		if a.Index > 5 {
			return specs.LinuxSyscall{}, fmt.Errorf("args[%d]: index %d out of range 0-5", j, a.Index)
		}
		if !slices.Contains(seccompOperators, a.Op) {
			return specs.LinuxSyscall{}, fmt.Errorf("args[%d]: unknown op %q", j, a.Op)
		}
	}
	return specs.LinuxSyscall{
		Names:    names,
		Action:   r.Action,
		ErrnoRet: clonePtr(r.ErrnoRet),
		Args:     slices.Clone(r.Args),
	}, nil
}

// cloneSeccomp deep-copies a LinuxSeccomp. Nil slices stay nil (a nil Flags
// means "runtime default" to runc, an empty one means "no flags").
func cloneSeccomp(in *specs.LinuxSeccomp) *specs.LinuxSeccomp {
	out := *in
	out.DefaultErrnoRet = clonePtr(in.DefaultErrnoRet)
	out.Architectures = slices.Clone(in.Architectures)
	out.Flags = slices.Clone(in.Flags)
	out.Syscalls = make([]specs.LinuxSyscall, len(in.Syscalls))
	for i, sc := range in.Syscalls {
		sc.Names = slices.Clone(sc.Names)
		sc.ErrnoRet = clonePtr(sc.ErrnoRet)
		sc.Args = slices.Clone(sc.Args)
		out.Syscalls[i] = sc
	}
	return &out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/executor/hostexec"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

func init() { register(newDoctorCmd) }

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail"`
}

type doctorReport struct {
	Home            string                 `json:"home"`
	SandboxReady    bool                   `json:"sandbox_ready"`
	HostReady       bool                   `json:"host_ready"`
	HostConfinement *hostConfinementReport `json:"host_confinement"`
	// PythonSandboxReady: runtime: python tools can run sandboxed
	// (sandbox.python_image set and resolving, the backend can run it).
	PythonSandboxReady bool `json:"python_sandbox_ready"`
	// PythonHostReady: they can run on the host (host_ready and the
	// host's python3).
	PythonHostReady bool `json:"python_host_ready"`
	// NodeSandboxReady: MCP servers started as [node, /pack/FILE] can
	// run sandboxed (sandbox.node_image set and resolving, the backend
	// can run it).
	NodeSandboxReady bool    `json:"node_sandbox_ready"`
	Checks           []check `json:"checks"`
	PluginAPIs       []int   `json:"plugin_api_versions"`
	// SDKKeys are the AgentNode SDK's own keys in the config
	// (specs/config.md): mapped onto agentnode's policy, or accepted and
	// not enforced.
	SDKKeys []configedit.SDKKey `json:"sdk_keys,omitempty"`
	// UserNamespace says whether the configured sandbox backend gives
	// each sandbox a user namespace of its own (nil without a config).
	UserNamespace *usernsReport `json:"sandbox_user_namespace,omitempty"`
	// SandboxRuntime is the runtime choice of sandboxed runs and whether
	// the backend can run gVisor when the config asks for it (nil without
	// a config).
	SandboxRuntime *runtimeReport `json:"sandbox_runtime,omitempty"`
	Version        string         `json:"version"`
}

// runtimeReport is sandbox.runtime, sandbox.runtime_by_trust and, when
// either names gvisor, whether the configured backend confirmed it.
type runtimeReport struct {
	Runtime        string            `json:"runtime"`
	RuntimeByTrust map[string]string `json:"runtime_by_trust,omitempty"`
	// GVisorUsed: some tier runs under gVisor; GVisorAvailable: the
	// backend confirmed it can (only checked when used).
	GVisorUsed      bool `json:"gvisor_used"`
	GVisorAvailable bool `json:"gvisor_available"`
}

// sandboxRuntimeReport reads the runtime choice from the config.
func sandboxRuntimeReport(c *config.Config) *runtimeReport {
	r := &runtimeReport{Runtime: sandbox.RuntimeFor("", c.Sandbox.Runtime, nil), RuntimeByTrust: c.Sandbox.RuntimeByTrust}
	r.GVisorUsed = r.Runtime == sandbox.RuntimeGVisor
	for _, rt := range c.Sandbox.RuntimeByTrust {
		r.GVisorUsed = r.GVisorUsed || rt == sandbox.RuntimeGVisor
	}
	return r
}

// usernsReport is the doctor's note on the sandbox user namespace.
type usernsReport struct {
	Backend string `json:"backend"`
	// Known: the backend is a bundled one whose answer agentnode knows.
	Known  bool   `json:"known"`
	Has    bool   `json:"has_user_namespace"`
	Detail string `json:"detail"`
}

// usernsBackends are the bundled backends and whether each runs every
// sandbox in a user namespace of its own (specs/sandbox/README.md).
var usernsBackends = map[string]bool{"libcontainer": true, "docker": false, "podman": false}

// usernsStatus is the note for backend.
func usernsStatus(backend string) *usernsReport {
	has, known := usernsBackends[backend]
	r := &usernsReport{Backend: backend, Known: known, Has: has}
	switch {
	case !known:
		r.Detail = backend + ": not a bundled backend; whether it maps the sandbox user to other host ids is unknown"
	case has:
		r.Detail = backend + ": every sandbox has its own user namespace (uid 1000 inside is a subordinate id of agentnode's reservation on the host)"
	default:
		r.Detail = backend + ": no user namespace: the sandbox user is host uid 1000 (files of host uid 1000 are its own); the libcontainer backend has one"
	}
	return r
}

// hostConfinementReport is what this kernel and build can do to confine
// trusted/curated tools on the host (executor/confine), and whether they can
// run there under sandbox.host_confinement.
type hostConfinementReport struct {
	// Mode is sandbox.host_confinement ("" when the config did not load).
	Mode           string `json:"mode"`
	LandlockABI    int    `json:"landlock_abi"`
	LandlockMinABI int    `json:"landlock_min_abi"`
	Seccomp        bool   `json:"seccomp"`
	SeccompError   string `json:"seccomp_error,omitempty"`
	// Possible: a trusted/curated tool placed on the host runs (else it is
	// refused with sandbox_unavailable).
	Possible bool `json:"host_runs_possible"`
	// Note is how it would run when not fully confined
	// ("unconfined: landlock unavailable"), as the audit record says.
	Note string `json:"note,omitempty"`
}

func newDoctorCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check config, audit log, keychain, plugin pins, sandbox backend and image pin",
		Long: "doctor checks everything a run depends on. It exits 0 only if sandboxed execution is\n" +
			"possible (specs/cli.md); host-only readiness is reported as host_ready, which also needs the\n" +
			"host confinement sandbox.host_confinement asks for (Landlock ABI, seccomp: host_confinement).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := runDoctor()
			if jsonOut {
				_ = writeJSON(cmd.OutOrStdout(), rep)
			} else {
				for _, c := range rep.Checks {
					mark := "ok  "
					if !c.OK {
						mark = "FAIL"
					}
					line := fmt.Sprintf("%s %-22s %s", mark, termsafe.Line(c.Name), termsafe.Line(c.Detail))
					if c.Code != "" {
						line += " [" + c.Code + "]"
					}
					fmt.Fprintln(cmd.OutOrStdout(), line)
				}
				for _, k := range rep.SDKKeys {
					status := "mapped:"
					if k.Status == config.SDKNotEnforced {
						status = "accepted, not enforced by agentnode"
					}
					v, _ := json.Marshal(k.Value)
					detail := fmt.Sprintf("AgentNode SDK key %s = %s: %s", k.Key, v, status)
					if k.Status == config.SDKMapped {
						detail += " " + k.Effect
					}
					fmt.Fprintf(cmd.OutOrStdout(), "note %-22s %s\n", "config", termsafe.Line(detail))
				}
				if u := rep.UserNamespace; u != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "note %-22s %s\n", "sandbox user namespace", termsafe.Line(u.Detail))
				}
				if r := rep.SandboxRuntime; r != nil {
					by := "none"
					if len(r.RuntimeByTrust) > 0 {
						b, _ := json.Marshal(r.RuntimeByTrust)
						by = string(b)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "note %-22s %s (by trust tier: %s)\n", "sandbox runtime", r.Runtime, termsafe.Line(by))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "host execution:      %s\nsandboxed execution: %s\n", yesNo(rep.HostReady), yesNo(rep.SandboxReady))
			}
			if !rep.SandboxReady {
				return exitWith(reason.ExitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "possible"
	}
	return "not possible"
}

func runDoctor() *doctorReport {
	rep := &doctorReport{PluginAPIs: plugin.SupportedAPIVersions, Version: version}
	add := func(name string, err error, okDetail string) bool {
		c := check{Name: name, OK: err == nil, Detail: okDetail}
		if err != nil {
			c.Detail = err.Error()
			c.Code = string(reason.CodeOf(err))
		}
		rep.Checks = append(rep.Checks, c)
		return err == nil
	}
	dir, err := home.Dir()
	if !add("home", err, dir) {
		return rep
	}
	rep.Home = dir
	cfgPath := home.ConfigPath(dir)
	cfg, err := config.Load(cfgPath)
	configOK := add("config", err, cfgPath)
	if cfg != nil {
		if keys, err := configedit.SDKKeys(cfg); err == nil {
			rep.SDKKeys = keys
		}
	}
	auditOK := add("audit", checkAuditDir(home.AuditDir(dir)), home.AuditDir(dir)+" is writable")
	add("keychain", keychain.Available(), "Secret Service reachable")

	pluginsOK := true
	var wanted []string
	if cfg != nil {
		wanted = append(wanted, pluginhost.Key(plugin.KindTrust, cfg.Trust.Plugin))
		for _, n := range cfg.Guard.Inspectors {
			wanted = append(wanted, pluginhost.Key(plugin.KindGuard, n))
		}
	}
	binDir, _ := pluginhost.DefaultBinDir()
	entries, err := plugincat.Discover(dir, binDir)
	if err != nil {
		pluginsOK = add("plugins", err, "")
	} else {
		found := map[string]plugincat.Entry{}
		for _, e := range entries {
			if !e.Shadowed {
				found[e.Key()] = e
			}
		}
		for _, key := range wanted {
			e, ok := found[key]
			switch {
			case !ok:
				pluginsOK = add("plugin "+key, reason.New(reason.PluginUnavailable, "not installed"), "") && pluginsOK
			case e.Hash != plugincat.HashOK:
				pluginsOK = add("plugin "+key, reason.New(reason.PluginUnpinned, "%s: pin %s", e.Path, e.Hash), "") && pluginsOK
			default:
				add("plugin "+key, nil, e.Path+" pinned")
			}
		}
	}
	baseOK := configOK && auditOK && pluginsOK

	mode := ""
	if cfg != nil {
		mode = cfg.Sandbox.HostConfinement
	}
	hc, err := hostConfinementStatus(mode, hostexec.ConfinementReadiness())
	rep.HostConfinement = hc
	confineOK := add("host confinement", err, hostConfinementDetail(hc))
	rep.HostReady = baseOK && confineOK

	sandboxOK := false
	if cfg != nil {
		img, err := image.Resolve(dir, cfg.Sandbox.Image)
		imgOK := add("sandbox image", err, cfg.Sandbox.Image+" resolves (digest and rootfs verified)")
		sandboxOK = add("sandbox backend", checkBackend(dir, cfg.Sandbox.Backend, img, ""), cfg.Sandbox.Backend+" available") && imgOK
		rt := sandboxRuntimeReport(cfg)
		rep.SandboxRuntime = rt
		if rt.GVisorUsed {
			// Runs placed on gVisor are refused when the backend cannot
			// run it: sandboxed execution is then not (fully) possible.
			var detail string
			err := checkBackendDetail(dir, cfg.Sandbox.Backend, img, sandbox.RuntimeGVisor, &detail)
			ok := cfg.Sandbox.Backend + " runs gVisor (runsc)"
			if detail != "" {
				ok += ": " + termsafe.Line(detail)
			}
			rt.GVisorAvailable = add("sandbox runtime gvisor", err, ok)
			sandboxOK = sandboxOK && rt.GVisorAvailable
		}
	}
	rep.SandboxReady = baseOK && sandboxOK
	if cfg != nil {
		rep.UserNamespace = usernsStatus(cfg.Sandbox.Backend)
	}
	if cfg != nil {
		// runtime: python tools: the host's interpreter, and the pinned
		// Python runtime image (optional: exec tools need neither, so
		// neither changes the exit code).
		rep.PythonHostReady = add("host python", hostexec.CheckPython(),
			python.Interpreter+" (runtime: python tools on the host)") && rep.HostReady
		pst, pimg := pythonImageStatus(dir, cfg.Sandbox.PythonImage)
		var perr error
		if !pst.Resolves {
			perr = reason.New(reason.Code(pst.Code), "%s", pst.Detail)
		}
		if add("python image", perr, cfg.Sandbox.PythonImage+" resolves (digest and rootfs verified)") {
			rep.PythonSandboxReady = add("python image backend", checkBackend(dir, cfg.Sandbox.Backend, pimg, ""),
				cfg.Sandbox.Backend+" can run the python image") && rep.SandboxReady
		}
		// MCP servers started with node: the pinned Node runtime image
		// (optional too).
		nst, nimg := nodeImageStatus(dir, cfg.Sandbox.NodeImage)
		var nerr error
		if !nst.Resolves {
			nerr = reason.New(reason.Code(nst.Code), "%s", nst.Detail)
		}
		if add("node image", nerr, cfg.Sandbox.NodeImage+" resolves (digest and rootfs verified)") {
			rep.NodeSandboxReady = add("node image backend", checkBackend(dir, cfg.Sandbox.Backend, nimg, ""),
				cfg.Sandbox.Backend+" can run the node image") && rep.SandboxReady
		}
	}
	return rep
}

// hostConfinementStatus reports what r (hostexec.ConfinementReadiness)
// allows under mode, with the error a host run would be refused with. An
// empty mode (no config) reports the kernel only, as not possible.
func hostConfinementStatus(mode string, r confine.Readiness) (*hostConfinementReport, error) {
	hc := &hostConfinementReport{Mode: mode, LandlockABI: r.LandlockABI, LandlockMinABI: confine.MinABI,
		Seccomp: r.Seccomp == nil}
	if r.Seccomp != nil {
		hc.SeccompError = r.Seccomp.Error()
	}
	if mode == "" {
		return hc, reason.New(reason.ConfigInvalid, "sandbox.host_confinement unknown: the config did not load")
	}
	a, err := hostexec.AssessConfinement(r, mode)
	if err != nil {
		return hc, err
	}
	hc.Possible, hc.Note = true, a.Note
	return hc, nil
}

// hostConfinementDetail is the doctor's line for a possible host run.
func hostConfinementDetail(hc *hostConfinementReport) string {
	d := fmt.Sprintf("landlock ABI %d (full confinement needs %d), seccomp ok; %s: ", hc.LandlockABI,
		hc.LandlockMinABI, hc.Mode)
	if hc.Note != "" {
		return d + "trusted/curated tools run on the host (" + hc.Note + ")"
	}
	return d + "trusted/curated tools run on the host fully confined"
}

// checkAuditDir checks the audit directory exists and accepts a new file,
// without touching the log itself.
func checkAuditDir(dir string) error {
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return reason.New(reason.AuditUnavailable, "audit directory not writable: %w", err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// checkBackend starts the configured backend plugin and asks it whether it
// can run the image.
func checkBackend(homeDir, backend string, img *image.Image, runtime string) error {
	return checkBackendDetail(homeDir, backend, img, runtime, nil)
}

// checkBackendDetail is checkBackend that also stores the backend's detail
// of an available answer (gVisor's version, say) in detail when not nil.
func checkBackendDetail(homeDir, backend string, img *image.Image, runtime string, detail *string) error {
	host := pluginhost.New(pluginhost.Options{HomeDir: homeDir, LogOutput: termsafe.NewWriter(os.Stderr)})
	defer host.Close()
	ctx, cancel := context.WithTimeout(context.Background(), host.CallTimeout())
	defer cancel()
	client, err := host.Sandbox(ctx, backend)
	if err != nil {
		return err
	}
	req := &sandbox.AvailabilityRequest{Runtime: runtime}
	if img != nil {
		req.Image, req.ImageStore = img.Ref, img.Store
	}
	resp, err := client.Availability(ctx, req)
	if err != nil {
		return pluginhost.CallError(pluginhost.Key(plugin.KindSandbox, backend), err)
	}
	if !resp.Available && resp.Reason == sandbox.ReasonRuntimeMissing {
		return reason.New(reason.SandboxRuntimeUnavailable, "%s: %s (%s)", backend, resp.Reason, resp.Detail)
	}
	if !resp.Available {
		return reason.New(reason.SandboxUnavailable, "%s: %s (%s)", backend, resp.Reason, resp.Detail)
	}
	if detail != nil {
		*detail = resp.Detail
	}
	return nil
}

package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

func doctorJSON(t *testing.T) (int, doctorReport, string) {
	t.Helper()
	code, out, _ := runCLI(t, "doctor", "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json output %q: %v", out, err)
	}
	return code, rep, out
}

func checkNamed(rep doctorReport, name string) *check {
	for i := range rep.Checks {
		if rep.Checks[i].Name == name {
			return &rep.Checks[i]
		}
	}
	return nil
}

// TestDoctorHostConfinement: doctor reports this kernel's host confinement
// as it is, under the configured mode, and host_ready follows it; the
// exit code still says only whether sandboxed execution is possible.
func TestDoctorHostConfinement(t *testing.T) {
	dir := trustHome(t)
	abi := confine.LandlockABI()
	for _, mode := range []string{confine.ModeRequired, confine.ModeBestEffort} {
		if err := configedit.Set(home.ConfigPath(dir), "sandbox.host_confinement", mode); err != nil {
			t.Fatal(err)
		}
		code, rep, out := doctorJSON(t)
		hc := rep.HostConfinement
		if hc == nil || !strings.Contains(out, `"host_confinement":{`) || !strings.Contains(out, `"host_runs_possible":`) {
			t.Fatalf("%s: no host_confinement in %s", mode, out)
		}
		if hc.Mode != mode || hc.LandlockABI != abi || hc.LandlockMinABI != confine.MinABI || !hc.Seccomp {
			t.Fatalf("%s: %+v (kernel ABI %d)", mode, hc, abi)
		}
		wantPossible := abi >= confine.MinABI || mode == confine.ModeBestEffort
		c := checkNamed(rep, "host confinement")
		if hc.Possible != wantPossible || c == nil || c.OK != wantPossible {
			t.Fatalf("%s on ABI %d: possible %v, check %+v", mode, abi, hc.Possible, c)
		}
		// No sandbox image is pinned here: exit 1 whatever the host can do.
		if rep.SandboxReady || code != 1 {
			t.Fatalf("%s: exit %d, sandbox_ready %v", mode, code, rep.SandboxReady)
		}
		if !wantPossible && rep.HostReady {
			t.Fatalf("%s: host_ready without host confinement", mode)
		}
	}
	code, text, _ := runCLI(t, "doctor")
	if code != 1 || !strings.Contains(text, "host confinement") || !strings.Contains(text, "landlock ABI") {
		t.Fatalf("doctor: exit %d\n%s", code, text)
	}
}

// TestHostConfinementStatus covers kernels this machine is not: the
// doctor says what a host run would meet, with its code.
func TestHostConfinementStatus(t *testing.T) {
	noSeccomp := confine.Readiness{LandlockABI: 7, Seccomp: confine.ErrSeccompUnavailable}
	for _, c := range []struct {
		mode     string
		r        confine.Readiness
		possible bool
		note     string
		code     reason.Code
		msg      string
	}{
		{confine.ModeRequired, confine.Readiness{LandlockABI: 7}, true, "", "", ""},
		{confine.ModeRequired, confine.Readiness{LandlockABI: 3}, false, "", reason.SandboxUnavailable, "Landlock ABI is 3, confinement needs 6"},
		{confine.ModeRequired, confine.Readiness{}, false, "", reason.SandboxUnavailable, "no Landlock"},
		{confine.ModeBestEffort, confine.Readiness{LandlockABI: 3}, true, "partly confined: landlock ABI 3 < 6", "", ""},
		{confine.ModeBestEffort, confine.Readiness{}, true, "unconfined: landlock unavailable", "", ""},
		{confine.ModeBestEffort, noSeccomp, false, "", reason.SandboxUnavailable, "seccomp"},
		{confine.ModeRequired, noSeccomp, false, "", reason.SandboxUnavailable, "seccomp"},
		{"", confine.Readiness{LandlockABI: 7}, false, "", reason.ConfigInvalid, "config did not load"},
	} {
		hc, err := hostConfinementStatus(c.mode, c.r)
		if hc.Possible != c.possible || hc.Note != c.note || hc.LandlockABI != c.r.LandlockABI || hc.Seccomp != (c.r.Seccomp == nil) {
			t.Errorf("%s %+v: %+v", c.mode, c.r, hc)
		}
		if c.code == "" {
			if err != nil {
				t.Errorf("%s %+v: %v", c.mode, c.r, err)
			} else if d := hostConfinementDetail(hc); !strings.Contains(d, c.mode) || (c.note != "" && !strings.Contains(d, c.note)) {
				t.Errorf("%s %+v: detail %q", c.mode, c.r, d)
			}
			continue
		}
		if reason.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %+v: %v, want %s %q", c.mode, c.r, err, c.code, c.msg)
		}
		if c.r.Seccomp != nil && (!errors.Is(err, confine.ErrSeccompUnavailable) || hc.SeccompError == "") {
			t.Errorf("%s without seccomp: %v, %+v", c.mode, err, hc)
		}
	}
}

// TestDoctorUserNamespace: doctor says whether the configured backend gives
// each sandbox a user namespace, and which bundled backends do not.
func TestDoctorUserNamespace(t *testing.T) {
	trustHome(t)
	_, rep, out := doctorJSON(t)
	if u := rep.UserNamespace; u == nil || u.Backend != "libcontainer" || !u.Has || !u.Known {
		t.Fatalf("sandbox_user_namespace = %+v in %s", rep.UserNamespace, out)
	}
	for backend, has := range map[string]bool{"docker": false, "podman": false, "libcontainer": true} {
		u := usernsStatus(backend)
		if !u.Known || u.Has != has || !strings.Contains(u.Detail, backend) {
			t.Errorf("usernsStatus(%s) = %+v", backend, u)
		}
		if !has && !strings.Contains(u.Detail, "no user namespace") {
			t.Errorf("usernsStatus(%s) does not say it lacks one: %q", backend, u.Detail)
		}
	}
	if u := usernsStatus("thirdparty"); u.Known || u.Has {
		t.Errorf("an unknown backend: %+v", u)
	}
}

package hostexec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/testuser"
)

const (
	// asUserEnv marks this test binary re-executed as a created normal
	// user by TestConfinedEscapesFailAsUser.
	asUserEnv = "AGENTNODE_TEST_AS_USER"
	// escapeBinEnv names the escape probe the parent built.
	escapeBinEnv = "AGENTNODE_TEST_ESCAPE_BIN"
)

// requireAsUser fails a test re-executed as the created user that finds
// itself root: the run would prove nothing about a normal user.
func requireAsUser(t *testing.T) {
	t.Helper()
	if os.Getenv(asUserEnv) == "1" && os.Geteuid() == 0 {
		t.Fatal("re-executed as a normal user, but running as root")
	}
}

// TestConfinedEscapesFailAsUser: host placement needs no root, and a normal
// user's host tool is as confined (Landlock + seccomp) as root's. The same
// attacker as TestConfinedEscapesFail (and the legitimate tool) runs in
// this test binary re-executed as a created user, whose own home, own
// processes and own ~/.ssh are exactly what confinement must keep from it.
func TestConfinedEscapesFailAsUser(t *testing.T) {
	if os.Getenv(asUserEnv) == "1" {
		t.Skip("already the created user")
	}
	requireLandlock(t)
	u := testuser.Create(t, func(format string, args ...any) {
		t.Helper()
		if os.Getenv("AGENTNODE_REQUIRE_LANDLOCK") == "1" {
			t.Fatalf(format+" (and AGENTNODE_REQUIRE_LANDLOCK=1)", args...)
		}
		t.Skipf(format, args...)
	})
	probe := u.Executable(t, filepath.Join(escapePack(t), "escape"))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{asUserEnv + "=1", escapeBinEnv + "=" + probe, "AGENTNODE_REQUIRE_LANDLOCK=1"}
	out, err := u.Command(env, u.Executable(t, exe), "-test.run=^(TestConfinedEscapesFail|TestConfinedLegitTool)$", "-test.v", "-test.count=1").CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %v\n%s", u, err, out)
	}
	t.Logf("as %s:\n%s", u, out)
	for _, name := range []string{"TestConfinedEscapesFail", "TestConfinedLegitTool"} {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("as %s: %s did not pass:\n%s", u, name, out)
		}
	}
}

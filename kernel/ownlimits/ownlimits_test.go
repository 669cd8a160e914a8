package ownlimits

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRestore: Restore puts back soft limits lowered from
// inside and names them; a lowered hard limit it puts back where the
// process may raise it again (CAP_SYS_RESOURCE), else it says so and
// raises the soft limit as far as the hard one goes. The hard limit is
// lowered in a child process (this test binary again), since without the
// capability it stays lowered.
func TestRestore(t *testing.T) {
	if os.Getenv("AGENTNODE_TEST_LOWER_HARD") == "1" {
		lowerHardChild()
		return
	}
	if changed, err := Restore(); err != nil || len(changed) != 0 {
		t.Fatalf("nothing changed yet: %v %v", changed, err)
	}
	var fsize, nofile unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &fsize); err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: nofile.Max}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: fsize.Max}); err != nil {
		t.Fatal(err)
	}
	changed, err := Restore()
	if err != nil || strings.Join(changed, ",") != "FSIZE,NOFILE" {
		t.Fatalf("Restore: %v %v", changed, err)
	}
	var now unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &now); err != nil || now != fsize {
		t.Fatalf("FSIZE %+v, want %+v", now, fsize)
	}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &now); err != nil || now != nofile {
		t.Fatalf("NOFILE %+v, want %+v", now, nofile)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRestore$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENTNODE_TEST_LOWER_HARD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "restored FSIZE err=<nil> now=" + Format(fsize)
	if fsize.Max > 1<<40 && !hasCap(unix.CAP_SYS_RESOURCE) {
		want = "restored FSIZE err=a tool changed agentnode's resource limits; not restored: " +
			"RLIMIT_FSIZE is 0:1099511627776, was " + Format(fsize) + ": operation not permitted " +
			"now=1099511627776:1099511627776"
	}
	if !strings.Contains(string(out), want+"\n") {
		t.Fatalf("child:\n%s\nwant %q", out, want)
	}
}

// lowerHardChild lowers RLIMIT_FSIZE to 0 soft and (at most) 1 TiB hard, restores
// and prints what came of it.
func lowerHardChild() {
	var was unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_FSIZE, &was)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: min(was.Max, 1<<40)}); err != nil {
		fmt.Println("setrlimit:", err)
		return
	}
	changed, err := Restore()
	var now unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_FSIZE, &now)
	fmt.Printf("restored %s err=%v now=%s\n", strings.Join(changed, ","), err, Format(now))
}

// hasCap reports whether the calling thread has capability c in its
// effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

package debimage

import "testing"

// policyOut is `apt-cache policy` on a Debian 12 host that also has a
// vendor's repository (NodeSource's shape) configured.
const policyOut = `Package files:
 100 /var/lib/dpkg/status
     release a=now
 600 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
     release o=Node Source,n=nodistro,l=Node Source,c=main,b=amd64
     origin deb.nodesource.com
 500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
     release v=12,o=Debian,a=oldstable-security,n=bookworm-security,l=Debian-Security,c=main,b=amd64
     origin deb.debian.org
 500 http://deb.debian.org/debian bookworm/main amd64 Packages
     release v=12.15,o=Debian,a=oldstable,n=bookworm,l=Debian Main,c=main,b=amd64
     origin deb.debian.org
Pinned packages:
`

// TestNewestFromDebian: the version chosen is the newest one a Debian
// package file offers — not the vendor's newer one, not one only in dpkg's
// status file — and none when Debian offers none.
func TestNewestFromDebian(t *testing.T) {
	files := debianFiles(policyOut)
	if len(files) != 2 || !files["http://deb.debian.org/debian bookworm/main amd64 Packages"] ||
		files["https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages"] {
		t.Fatalf("Debian's files: %v", files)
	}
	for _, c := range []struct{ out, want string }{
		{`nodejs:
  Installed: 20.20.2-1nodesource1
  Candidate: 20.20.2-1nodesource1
  Version table:
 *** 20.20.2-1nodesource1 600
        600 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
        100 /var/lib/dpkg/status
     18.20.4+dfsg-1~deb12u3 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
     18.20.4+dfsg-1~deb12u2 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
`, "18.20.4+dfsg-1~deb12u3"},
		{`libc6:
  Installed: 2.36-9+deb12u14
  Candidate: 2.36-9+deb12u14
  Version table:
 *** 2.36-9+deb12u14 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
     2.36-9+deb12u7 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
`, "2.36-9+deb12u14"},
		{`local-only:
  Installed: 1.0
  Candidate: 1.0
  Version table:
 *** 1.0 100
        100 /var/lib/dpkg/status
`, ""},
		{`vendor-only:
  Installed: (none)
  Candidate: 2.0
  Version table:
     2.0 600
        600 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
`, ""},
		{"", ""},
	} {
		if got := newestFrom(c.out, files); got != c.want {
			t.Errorf("%.20q: %q, want %q", c.out, got, c.want)
		}
	}
}

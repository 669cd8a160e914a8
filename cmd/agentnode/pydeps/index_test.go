package pydeps

import (
	"archive/tar"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// TestParseIndexURL: https on port 443 of a hostname the egress allowlist
// accepts, nothing else; the URL pip gets ends in a slash.
func TestParseIndexURL(t *testing.T) {
	good := map[string][2]string{
		"https://pypi.example.org/simple/":    {"https://pypi.example.org/simple/", "pypi.example.org"},
		"https://pypi.example.org/simple":     {"https://pypi.example.org/simple/", "pypi.example.org"},
		"https://pypi.example.org:443/simple": {"https://pypi.example.org/simple/", "pypi.example.org"},
		"https://idx.example.com":             {"https://idx.example.com/", "idx.example.com"},
		"https://idx.example.com/a/b%20c/~d/": {"https://idx.example.com/a/b%20c/~d/", "idx.example.com"},
	}
	for in, want := range good {
		u, h, err := ParseIndexURL(in)
		if err != nil || u != want[0] || h != want[1] {
			t.Errorf("ParseIndexURL(%q) = %q %q %v, want %q %q", in, u, h, err, want[0], want[1])
		}
	}
	bad := map[string]string{
		"http://pypi.example.org/simple/":          "http is refused",
		"ftp://pypi.example.org/simple/":           "not an https URL",
		"pypi.example.org/simple/":                 "not an https URL",
		"https://pypi.example.org:8443/simple/":    "port 8443",
		"https://pypi.example.org:0443/simple/":    "port 0443",
		"https://1.2.3.4/simple/":                  "IP literals",
		"https://[::1]/simple/":                    "IP literals",
		"https://127.1/simple/":                    "IP literals",
		"https://localhost/simple/":                "single label",
		"https://pypi.internal/simple/":            "special-use",
		"https://PyPI.example.org/simple/":         "not lower-case",
		"https://user:pw@pypi.example.org/simple/": "user information",
		"https://pypi.example.org/simple/?x=1":     "query or fragment",
		"https://pypi.example.org/simple/#f":       "query or fragment",
		"https://pypi.example.org/simple/?":        "query or fragment",
		"https://pypi.example.org/a'b/":            "the path may hold",
		"https://pypi.example.org/a;$(id)/":        "the path may hold",
		"https:pypi.example.org":                   "not a hierarchical URL",
		"https://":                                 "host",
	}
	for in, want := range bad {
		_, _, err := ParseIndexURL(in)
		if !errors.Is(err, ErrDependencies) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseIndexURL(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func testCertPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test index CA"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestReadIndexCert: PEM certificates only, returned without what was
// around them.
func TestReadIndexCert(t *testing.T) {
	dir := t.TempDir()
	cert := testCertPEM(t)
	write := func(name string, body []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	two := append(append([]byte("# a comment pem.Decode skips\n"), cert...), cert...)
	got, err := ReadIndexCert(write("two.pem", two))
	if err != nil || string(got) != string(cert)+string(cert) {
		t.Fatalf("two certificates: %q %v", got, err)
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")})
	notCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	bad := map[string][]byte{
		"empty":       nil,
		"text":        []byte("hello\n"),
		"key":         append(append([]byte{}, cert...), key...),
		"not DER":     notCert,
		"trailing":    append(append([]byte{}, cert...), "junk"...),
		"over a MiB":  make([]byte, MaxIndexCertBytes+1),
		"missing":     nil,
		"a directory": nil,
	}
	for name, body := range bad {
		p := filepath.Join(dir, name)
		switch name {
		case "missing":
		case "a directory":
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			write(name, body)
		}
		if _, err := ReadIndexCert(p); !errors.Is(err, ErrDependencies) {
			t.Errorf("%s: %v, want ErrDependencies", name, err)
		}
	}
}

// TestInstallFromIndex: pip is told the index, the proxy (the forwarder's
// address, not the environment), the certificates and no retries; the
// sandbox gets the egress socket and no network; the certificates are the
// only file of the directory mounted at /pack, which is gone afterwards;
// without --index-cert pip trusts the image's bundle.
func TestInstallFromIndex(t *testing.T) {
	cert := testCertPEM(t)
	var packFiles []string
	var packDir string
	r := &tarRunner{}
	r.stream = func(*tar.Writer) error {
		packDir = r.spec.PackageDir
		ents, err := os.ReadDir(packDir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(packDir, e.Name()))
			if err != nil {
				return err
			}
			packFiles = append(packFiles, e.Name()+"="+string(b))
		}
		return nil
	}
	for _, withCert := range []bool{true, false} {
		packFiles = nil
		idx := &Index{URL: "https://idx.example.com/simple/", Host: "idx.example.com", EgressSocket: "/tmp/egress-1/proxy.sock"}
		if withCert {
			idx.CertPEM = cert
		}
		in := &Installer{Sandbox: r, Image: &image.Image{}, Index: idx}
		_, err := in.Install(context.Background(), t.TempDir(), []string{"liba>=2"})
		// The stream is empty: pip "installed nothing".
		if !errors.Is(err, ErrDependencies) || !strings.Contains(err.Error(), "installed nothing") {
			t.Fatalf("Install: %v", err)
		}
		sp := r.spec
		if sp.Network || sp.EgressSocket != idx.EgressSocket || sp.Args[len(sp.Args)-1] != "liba>=2" {
			t.Fatalf("spec %+v", sp)
		}
		want := "--only-binary :all: "
		wantCert := "--cert " + CABundle + " "
		if withCert {
			wantCert = "--cert /pack/index-ca.pem "
		}
		for _, w := range []string{want, "--isolated ", "--index-url https://idx.example.com/simple/ ",
			"--proxy " + profile.EgressProxyURL + " ", wantCert, "--retries 0 "} {
			if !strings.Contains(sp.Args[2], w) {
				t.Errorf("script %q lacks %q", sp.Args[2], w)
			}
		}
		if strings.Contains(sp.Args[2], "--no-index") || strings.Contains(sp.Args[2], "--find-links") {
			t.Errorf("script %q reads a wheelhouse", sp.Args[2])
		}
		wantFiles := []string{}
		if withCert {
			wantFiles = []string{"index-ca.pem=" + string(cert)}
		}
		if !slices.Equal(packFiles, wantFiles) && !(len(packFiles) == 0 && len(wantFiles) == 0) {
			t.Errorf("/pack holds %q, want %q", packFiles, wantFiles)
		}
		if _, err := os.Lstat(packDir); err == nil {
			t.Errorf("%s is left", packDir)
		}
	}
	// An index without a socket, or with a wheelhouse too: refused before
	// anything runs.
	for _, in := range []*Installer{
		{Sandbox: r, Image: &image.Image{}, Index: &Index{URL: "https://idx.example.com/", Host: "idx.example.com"}},
		{Sandbox: r, Image: &image.Image{}, Wheelhouse: t.TempDir(),
			Index: &Index{URL: "https://idx.example.com/", Host: "idx.example.com", EgressSocket: "/x"}},
	} {
		r.spec = sandbox.Spec{}
		if _, err := in.Install(context.Background(), t.TempDir(), []string{"liba"}); !errors.Is(err, ErrDependencies) || r.spec.RunID != "" {
			t.Errorf("Install: %v (ran: %v)", err, r.spec.RunID != "")
		}
	}
}

// TestPipErrorIndex: a requirement the index cannot satisfy is named with
// the index and what pip could not fetch.
func TestPipErrorIndex(t *testing.T) {
	in := &Installer{Index: &Index{URL: "https://idx.example.com/simple/"}}
	stderr := "Looking in indexes: https://idx.example.com/simple/\n" +
		"Could not fetch URL https://idx.example.com/simple/libb/: There was a problem confirming the ssl certificate - skipping\n" +
		"ERROR: Could not find a version that satisfies the requirement libb>=1 (from liba) (from versions: none)\n" +
		"ERROR: No matching distribution found for libb>=1\n"
	msg := in.pipError([]string{"liba"}, stderr, 1).Error()
	for _, want := range []string{`no wheel on the index https://idx.example.com/simple/ satisfies the requirement "libb>=1"`,
		"(required by liba)", "pip: Could not fetch URL https://idx.example.com/simple/libb/: There was a problem confirming the ssl certificate",
		"nothing was installed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

package debimage

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/cmd/agentnode/pydeps"
)

// TestCABundle: the installer image's CA bundle is every certificate of
// this host's Debian ca-certificates package, each checked against its
// md5sums, in name order, the same bytes on every build; without the
// package among the image's packages it is refused.
func TestCABundle(t *testing.T) {
	db, err := readStatus("/var/lib/dpkg", runtime.GOARCH)
	if err != nil {
		t.Skipf("no dpkg database: %v", err)
	}
	pkgs, _, err := db.closure([]string{caCertificatesPackage})
	if err != nil {
		t.Skipf("no %s installed: %v", caCertificatesPackage, err)
	}
	have := []imagebuild.File{{Name: "etc", Type: tar.TypeDir}}
	files, n, err := caBundle(db, pkgs, "/", pydeps.CABundle, have)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if want := []string{"etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt"}; !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}
	bundle := files[len(files)-1].Body
	// Every PEM block is a certificate that parses, as many as the
	// package has .crt files.
	count, rest := 0, bundle
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); b.Type != "CERTIFICATE" || err != nil {
			t.Fatalf("block %d: %s %v", count, b.Type, err)
		}
		count++
	}
	listed, err := db.fileList(pkgs[slices.IndexFunc(pkgs, func(p *dpkgPackage) bool { return p.name == caCertificatesPackage })])
	if err != nil {
		t.Fatal(err)
	}
	crts := 0
	for _, p := range listed {
		if strings.HasPrefix(p, caCertificatesDir) && strings.HasSuffix(p, ".crt") {
			crts++
		}
	}
	if count != n || n != crts || n < 50 || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("bundle: %d PEM certificates, %d reported, %d .crt files listed; rest %d bytes", count, n, crts, len(rest))
	}
	again, _, err := caBundle(db, pkgs, "/", pydeps.CABundle, have)
	if err != nil || !bytes.Equal(again[len(again)-1].Body, bundle) {
		t.Fatalf("a second build differs (%v)", err)
	}
	t.Logf("%d certificates, %d bytes", n, len(bundle))

	// Packages without ca-certificates (libc6's closure) have no bundle.
	other, _, err := db.closure([]string{"libc6"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := caBundle(db, other, "/", pydeps.CABundle, nil); !errors.Is(err, ErrPackage) {
		t.Fatalf("without %s: %v", caCertificatesPackage, err)
	}
}

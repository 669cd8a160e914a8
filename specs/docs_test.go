package specs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory (this file is in specs/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// trackedFiles lists the repository's files, as git tracks them, or by
// walking the tree when this is not a git checkout.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		var files []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			// A file deleted in the work tree but not yet from the index.
			if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// A path or document outside the repository: the team's background
	// notes live beside the repository and must never be cited from it.
	outsideRef = regexp.MustCompile(`\.\./shared\b|\bshared/[A-Z][A-Z-]*\.md\b|\bCONTRACT\.md\b|\bAGENTNODE-FACT[S]\b|\bDESIGN\.md\b|/work/`)
	urlRe      = regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^\s)>"'\x60]+`)
	// A document named in prose or a comment: something.md, maybe with a
	// relative directory.
	docRe = regexp.MustCompile(`[A-Za-z0-9_][A-Za-z0-9_./-]*\.md\b`)
	// A relative link target in Markdown.
	mdLinkRe = regexp.MustCompile(`\]\(([^)\s#]+)(?:#[^)\s]*)?\)`)
)

// TestReferencesStayInRepository fails when a tracked file names a path
// outside the repository or a document that does not exist in it, and when
// a Markdown link points at a file that does not exist or leaves the
// repository: someone who clones the project must be able to follow every
// reference.
func TestReferencesStayInRepository(t *testing.T) {
	root := repoRoot(t)
	files := trackedFiles(t, root)
	byBase := map[string]bool{}
	exists := map[string]bool{}
	for _, f := range files {
		byBase[filepath.Base(f)] = true
		exists[filepath.ToSlash(f)] = true
		for d := filepath.Dir(f); d != "."; d = filepath.Dir(d) {
			exists[filepath.ToSlash(d)] = true
		}
	}
	// This file necessarily spells the patterns it looks for.
	self := filepath.ToSlash(filepath.Join("specs", "docs_test.go"))
	checked := 0
	for _, f := range files {
		if filepath.ToSlash(f) == self || skipFile(f) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 { // binary
			continue
		}
		checked++
		dir := filepath.Dir(f)
		for i, line := range strings.Split(string(b), "\n") {
			where := f + ":" + strconv.Itoa(i+1)
			if m := outsideRef.FindString(line); m != "" {
				t.Errorf("%s: names %q, which is outside the repository", where, m)
			}
			noURL := urlRe.ReplaceAllString(line, " ")
			for _, doc := range docRe.FindAllString(noURL, -1) {
				if !docExists(doc, dir, byBase, exists) {
					t.Errorf("%s: names the document %q, which does not exist in the repository", where, doc)
				}
			}
			if !strings.HasSuffix(f, ".md") {
				continue
			}
			for _, m := range mdLinkRe.FindAllStringSubmatch(noURL, -1) {
				target := m[1]
				if strings.Contains(target, ":") { // mailto: and the like
					continue
				}
				p := filepath.ToSlash(filepath.Clean(filepath.Join(dir, target)))
				if p == ".." || strings.HasPrefix(p, "../") || filepath.IsAbs(target) {
					t.Errorf("%s: links to %q, outside the repository", where, target)
				} else if !exists[p] {
					t.Errorf("%s: links to %q, which does not exist", where, target)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: the file list is wrong", checked)
	}
}

// skipFile leaves out files whose content is not ours to word: lockfiles
// and module sums of third-party dependencies.
func skipFile(f string) bool {
	switch filepath.Base(f) {
	case "go.sum", "package-lock.json":
		return true
	}
	return strings.Contains(f, "node_modules/")
}

// docExists resolves a document name as written: relative to the naming
// file's directory, to the repository's top, or (a bare name) anywhere.
func docExists(doc, dir string, byBase, exists map[string]bool) bool {
	doc = strings.TrimPrefix(doc, "./")
	if !strings.Contains(doc, "/") {
		return byBase[doc]
	}
	for _, p := range []string{filepath.Join(dir, doc), doc} {
		if exists[filepath.ToSlash(filepath.Clean(p))] {
			return true
		}
	}
	// A path written from a subtree, e.g. "sandbox/README.md" in specs.
	for p := range exists {
		if strings.HasSuffix(p, "/"+doc) {
			return true
		}
	}
	return false
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/npmdeps"
	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/cmd/agentnode/pkglist"
	"github.com/agentnode/agentnode/cmd/agentnode/pydeps"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/kernel/validcache"
	"github.com/agentnode/agentnode/sdk/trust/attestation"
)

func init() {
	register(newInstallCmd)
	register(newRemoveCmd)
	register(newListCmd)
}

// installResult is what install prints with --json.
type installResult struct {
	PackageID     string `json:"package_id"`
	Version       string `json:"version"`
	ArtifactHash  string `json:"artifact_hash"`
	Source        string `json:"source"`                   // directory | archive
	ArchiveSHA256 string `json:"archive_sha256,omitempty"` // the archive file's SHA-256, for --sha256
	// DepsHash and Dependencies: the Python dependencies installed into
	// the package's .deps (specs/python.md), when it has any.
	DepsHash     string   `json:"deps_hash,omitempty"`
	Dependencies []string `json:"dependencies,omitempty"`
}

func newInstallCmd() *cobra.Command {
	var (
		jsonOut      bool
		attestations []string
		pin          string
		wheelhouse   string
		indexURL     string
		indexCert    string
		npmCache     string
		npmRegistry  string
		npmCert      string
	)
	cmd := &cobra.Command{
		Use:   "install PATH|ARCHIVE",
		Short: "Install a package directory or .tar.gz archive into the package store",
		Long: "Install checks the package's agentnode.yaml, copies the package tree into the store read-only and\n" +
			"records its content hash. ARCHIVE is a gzip-compressed tar (recognised by content), with the package\n" +
			"at its top level or in its only directory; unsafe entries (.., absolute names, devices, links out of\n" +
			"the package) and archives over the size caps are refused (specs/store.md). --sha256 pins the archive\n" +
			"file's SHA-256 (checked before unpacking) or a directory's content hash. Attestation files must hold\n" +
			"JSON; their signatures are checked when a tool runs. Installing a package id that is already\n" +
			"installed replaces it; on any error nothing changes.\n\n" +
			"A runtime: python package's pyproject.toml [project].dependencies are installed into its .deps,\n" +
			"by pip inside the sandbox, wheels only, from the directory --wheelhouse names (no network), or from\n" +
			"the package index --index-url names (https, port 443), reached only through the sealed egress proxy\n" +
			"with that host alone allowlisted, each connection audited; the index's certificate is verified\n" +
			"against the installer image's CA bundle (Debian's ca-certificates) or only against the certificates\n" +
			"--index-cert names. A requirement no wheel there satisfies refuses the install (specs/python.md).\n\n" +
			"An mcp_server package pinned to an npm package (mcp_server.install.manager npm) that ships a\n" +
			"package.json and package-lock.json but no node_modules gets its locked tree installed into its .deps\n" +
			"by `npm ci --ignore-scripts` inside the sandbox, offline from the npm cache --npm-cache names or from\n" +
			"the registry --npm-registry names through the sealed egress proxy allowing its host alone (its TLS\n" +
			"trusting the installer image's CA bundle, or only the certificates --npm-cert names); a\n" +
			"missing lock, an entry without integrity, a root not depending on the pinned version, or a package\n" +
			"needing an install script refuses the install (specs/mcp.md).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := requireSetUp()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			src := args[0]
			if _, err := os.Stat(src); err != nil {
				return fail(cmd, jsonOut, usageError("%s: %w", src, errors.Unwrap(err)))
			}
			if pin != "" {
				if _, err := pkginstall.ParsePin(pin); err != nil {
					return fail(cmd, jsonOut, usageError("--sha256: %w", err))
				}
			}
			atts, err := readAttestations(attestations)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			wh, err := absWheelhouse(wheelhouse)
			if err != nil {
				return fail(cmd, jsonOut, usageError("--wheelhouse: %w", err))
			}
			depsSrc := depsSource{wheelhouse: wh}
			if npmCache != "" {
				if depsSrc.npmCache, err = filepath.Abs(npmCache); err != nil {
					return fail(cmd, jsonOut, usageError("--npm-cache: %w", err))
				}
			}
			switch {
			case npmCache != "" && npmRegistry != "":
				return fail(cmd, jsonOut, usageError("--npm-cache and --npm-registry exclude each other: give one source of the npm tree"))
			case npmCert != "" && npmRegistry == "":
				return fail(cmd, jsonOut, usageError("--npm-cert needs --npm-registry"))
			case npmRegistry != "":
				u, h, err := pydeps.ParseHTTPSURL("--npm-registry", npmRegistry)
				if err != nil {
					return fail(cmd, jsonOut, usageError("%w", err))
				}
				depsSrc.npmReg = &pydeps.Index{URL: u, Host: h}
				if npmCert != "" {
					if depsSrc.npmReg.CertPEM, err = pydeps.ReadCert("--npm-cert", npmCert); err != nil {
						return fail(cmd, jsonOut, usageError("%w", err))
					}
				}
			}
			switch {
			case wheelhouse != "" && indexURL != "":
				return fail(cmd, jsonOut, usageError("--wheelhouse and --index-url exclude each other: give one source of dependencies"))
			case indexCert != "" && indexURL == "":
				return fail(cmd, jsonOut, usageError("--index-cert needs --index-url"))
			case indexURL != "":
				u, h, err := pydeps.ParseIndexURL(indexURL)
				if err != nil {
					return fail(cmd, jsonOut, usageError("%w", err))
				}
				depsSrc.index = &pydeps.Index{URL: u, Host: h}
				if indexCert != "" {
					if depsSrc.index.CertPEM, err = pydeps.ReadIndexCert(indexCert); err != nil {
						return fail(cmd, jsonOut, usageError("%w", err))
					}
				}
			}
			lk, err := lockfileUpdater() // agentnode.lock is checked before anything changes
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			// Installing dependencies runs a sandbox: an interrupt stops it.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			deps, stopDeps := depsInstaller(ctx, dir, depsSrc) // pydeps.go
			defer stopDeps()
			// The lockfile entry is written while the previous install is
			// still kept aside: if it cannot be, the install is undone
			// (store and lockfile change together or not at all).
			p, err := pkginstall.New(store.Open(home.PackagesDir(dir)).WithVerdicts(validcache.Open(home.VerdictsDir(dir)))).InstallFrom(src,
				pkginstall.InstallOptions{Attestations: atts, SHA256: pin, Deps: deps,
					Commit: func(p *store.Package) error { return lockfileInstall(lk, p) }})
			if err != nil {
				if badPackage(err) {
					// A bad manifest, archive, content or pin is a usage
					// error: exit 2, naming the file and the field or entry.
					return fail(cmd, jsonOut, &failure{exit: reason.ExitUsage, err: err})
				}
				return fail(cmd, jsonOut, err)
			}
			res := installResult{PackageID: p.ID, Version: p.Version, ArtifactHash: p.ArtifactHash,
				Source: p.Source, ArchiveSHA256: p.ArchiveSHA256, DepsHash: p.DepsHash, Dependencies: p.Dependencies}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s %s %s\n", res.PackageID, termsafe.Line(res.Version), res.ArtifactHash)
			if len(res.Dependencies) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "dependencies %s %s\n", termsafe.Line(strings.Join(res.Dependencies, " ")), res.DepsHash)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&attestations, "attestation", nil, "attestation `FILE` (JSON) to keep with the package; repeatable")
	cmd.Flags().StringVar(&wheelhouse, "wheelhouse", "", "`DIR` of wheels (*.whl) to install a Python package's pyproject.toml dependencies from, inside the sandbox")
	cmd.Flags().StringVar(&indexURL, "index-url", "", "package index `URL` (https, PEP 503) to install the dependencies from instead, through the sealed egress proxy allowing its host only")
	cmd.Flags().StringVar(&indexCert, "index-cert", "", "PEM `FILE` of the only certificates trusted for --index-url's TLS (default: the installer image's CA bundle)")
	cmd.Flags().StringVar(&npmCache, "npm-cache", "", "npm cache `DIR` to install an npm MCP server's locked tree from, offline, inside the sandbox")
	cmd.Flags().StringVar(&npmRegistry, "npm-registry", "", "npm registry `URL` (https) to download an npm MCP server's locked tree from instead, through the sealed egress proxy allowing its host only")
	cmd.Flags().StringVar(&npmCert, "npm-cert", "", "PEM `FILE` of the only certificates trusted for --npm-registry's TLS (default: the installer image's CA bundle)")
	cmd.Flags().StringVar(&pin, "sha256", "", "pin: the archive file's SHA-256 `HEX` (for a directory, its content hash); refused before unpacking on a mismatch")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// badPackage reports whether an install error is about what was given
// (manifest, archive, content, caps, pin) rather than about the machine. A
// directory's content is refused with the same errors as an archive's
// (symlinks out of the package, special files), so both exit 2.
func badPackage(err error) bool {
	var me *manifest.Error
	return errors.As(err, &me) || errors.Is(err, pkginstall.ErrBadArchive) || errors.Is(err, pkginstall.ErrTooLarge) ||
		errors.Is(err, pkginstall.ErrPinMismatch) || errors.Is(err, pkginstall.ErrBadPin) ||
		errors.Is(err, store.ErrLinkEscape) || errors.Is(err, store.ErrSpecialFile) ||
		errors.Is(err, pydeps.ErrDependencies) || errors.Is(err, npmdeps.ErrLock)
}

// requireSetUp returns AGENTNODE_HOME once agentnode is set up: installing
// refuses without a config file (not_set_up). Only the file's existence is
// checked here; commands that use the config validate it.
func requireSetUp() (string, error) {
	dir, err := home.Dir()
	if err != nil {
		return "", reason.New(reason.NotSetUp, "%w", err)
	}
	cfg := home.ConfigPath(dir)
	if _, err := os.Stat(cfg); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", reason.New(reason.NotSetUp, "agentnode is not set up: %s does not exist (run `agentnode setup`)", cfg)
		}
		return "", reason.New(reason.ConfigInvalid, "cannot read config %s: %w", cfg, err)
	}
	return dir, nil
}

// readAttestations reads each file; each must hold one JSON object.
func readAttestations(files []string) ([][]byte, error) {
	var out [][]byte
	for _, f := range files {
		// Attestations come with community packages: a regular file of at
		// most attestation.MaxSize bytes, never a FIFO or device.
		data, err := bounded.ReadFileFollow(f, attestation.MaxSize)
		if errors.Is(err, bounded.ErrNotRegular) || errors.Is(err, bounded.ErrTooLarge) {
			return nil, usageError("attestation %w", err)
		}
		if err != nil {
			return nil, usageError("attestation %s: %w", f, errors.Unwrap(err))
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			return nil, usageError("attestation %s: not a JSON object", f)
		}
		out = append(out, data)
	}
	return out, nil
}

func newRemoveCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "remove PKG",
		Short: "Remove an installed package",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := home.Dir()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			id := args[0]
			if !manifest.ValidPackageID(id) {
				return fail(cmd, jsonOut, usageError("invalid package id %q (want 3 to 60 characters of a-z, 0-9 and -)", id))
			}
			lk, err := lockfileUpdater() // agentnode.lock is checked before anything changes
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if err := pkginstall.Open(home.PackagesDir(dir)).Remove(id); err != nil {
				return fail(cmd, jsonOut, err)
			}
			if err := lockfileRemove(lk, id); err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"package_id": id, "removed": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// listEntry is one package in list --json.
type listEntry struct {
	PackageID    string    `json:"package_id"`
	Version      string    `json:"version"`
	Name         string    `json:"name"`
	Publisher    string    `json:"publisher"`
	PackageType  string    `json:"package_type"`
	Runtime      string    `json:"runtime"`
	ArtifactHash string    `json:"artifact_hash"`
	InstalledAt  time.Time `json:"installed_at"`
	Tools        []string  `json:"tools"`
	Attestations int       `json:"attestations"`
}

func newListCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List installed packages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := home.Dir()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			pkgs, listErr := pkglist.List(store.Open(home.PackagesDir(dir)).WithVerdicts(validcache.Open(home.VerdictsDir(dir))))
			entries := []listEntry{}
			for _, p := range pkgs {
				e := listEntry{
					PackageID:    p.ID,
					Version:      p.Version,
					Name:         p.Manifest.Name,
					Publisher:    p.Manifest.Publisher,
					PackageType:  p.Manifest.PackageType,
					Runtime:      p.Manifest.Runtime,
					ArtifactHash: p.ArtifactHash,
					InstalledAt:  p.InstalledAt,
					Tools:        []string{},
					Attestations: len(p.Attestations),
				}
				for _, t := range p.Manifest.Tools {
					e.Tools = append(e.Tools, t.Name)
				}
				entries = append(entries, e)
			}
			if jsonOut {
				out := map[string]any{"packages": entries}
				if listErr != nil {
					out["errors"] = errorLines(listErr)
				}
				if err := writeJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
				if listErr != nil {
					return exitWith(reason.ExitFailed)
				}
				return nil
			}
			if len(entries) > 0 {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PACKAGE\tVERSION\tTYPE\tRUNTIME\tARTIFACT HASH\tINSTALLED")
				for _, e := range entries {
					l := termsafe.Line // the store's metadata and manifests, as installed
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l(e.PackageID), l(e.Version), l(e.PackageType), l(e.Runtime),
						l(e.ArtifactHash), e.InstalledAt.Local().Format(time.RFC3339))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			} else if listErr == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "no packages installed")
			}
			if listErr != nil {
				// Unreadable packages are a problem found, not a refusal: exit 1.
				return fail(cmd, false, &failure{exit: reason.ExitFailed, err: listErr})
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// errorLines splits a joined error into its messages.
func errorLines(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

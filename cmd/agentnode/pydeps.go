package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/cmd/agentnode/npmdeps"
	"github.com/agentnode/agentnode/cmd/agentnode/pydeps"
	"github.com/agentnode/agentnode/cmd/agentnode/pyimage"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/executor/egress"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// depsSource is where `agentnode install` takes a package's dependencies
// from: the wheelhouse directory (--wheelhouse), or the index
// (--index-url, reached through sealed egress, with --index-cert's
// certificates when given).
type depsSource struct {
	wheelhouse string
	index      *pydeps.Index // URL, Host, CertPEM; the socket is set per install
	npmCache   string        // --npm-cache: an npm cache directory (npmdeps)
	npmReg     *pydeps.Index // --npm-registry: URL and Host (npmdeps, through sealed egress)
}

// depsInstaller is the store's InstallOptions.Deps for `agentnode install`:
// a `runtime: python` package whose pyproject.toml declares dependencies
// gets them installed from src by pip in the configured sandbox backend,
// with the image sandbox.python_installer_image (cmd/agentnode/pydeps). From an
// index, a sealed egress proxy allowing the index's host on port 443 alone
// is started for the install (executor/egress with its audit,
// egress.OpenAudit: the MCP servers' plugin, checks and audit records)
// and stopped after it; a teardown it
// cannot verify fails the install. A package without dependencies needs
// neither a source nor the sandbox. The returned cleanup stops the backend
// plugin if one started.
func depsInstaller(ctx context.Context, dir string, src depsSource) (func(string, *manifest.Manifest) ([]string, error), func()) {
	var host *pluginhost.Host
	cleanup := func() {
		if host != nil {
			host.Close()
		}
	}
	return func(content string, m *manifest.Manifest) ([]string, error) {
		if npmdeps.Needed(content, m) {
			return installNPM(ctx, dir, src, content, m, &host) // npmdeps.go
		}
		reqs, err := pydeps.Requirements(content, m)
		if err != nil || len(reqs) == 0 {
			return nil, err
		}
		if src.wheelhouse == "" && src.index == nil {
			return nil, fmt.Errorf("%w: %s declares dependencies (%d: %s …); give the wheels with --wheelhouse DIR or an index with --index-url URL",
				pydeps.ErrDependencies, pydeps.PyprojectFile, len(reqs), reqs[0])
		}
		cfg, err := config.Load(home.ConfigPath(dir))
		if err != nil {
			return nil, err
		}
		if cfg.Sandbox.PythonInstallerImage == "" {
			return nil, reason.New(reason.ImageUnpinned,
				"%s declares dependencies, and sandbox.python_installer_image is not set: build the installer image with `agentnode sandbox build --python-installer`",
				pydeps.PyprojectFile)
		}
		box, err := installSandbox(ctx, dir, cfg, cfg.Sandbox.PythonInstallerImage, &host)
		if err != nil {
			return nil, err
		}
		client, backend, img, limits, timeout := box.client, box.backend, box.img, box.limits, box.timeout
		in := &pydeps.Installer{
			Sandbox: client, Backend: backend, Image: img, Wheelhouse: src.wheelhouse,
			Limits: limits, Timeout: timeout,
			RunID: fmt.Sprintf("an-deps-%d", time.Now().UnixNano()),
		}
		if src.index == nil {
			return in.Install(ctx, content, reqs)
		}
		return installFromIndex(ctx, dir, cfg, host, in, *src.index, m, content, reqs)
	}, cleanup
}

// installBox is a sandbox backend ready to run an install on an
// installer image.
type installBox struct {
	client  *sandbox.Client
	backend string
	img     *image.Image
	limits  sandbox.Limits
	timeout time.Duration
}

// installSandbox resolves and verifies the installer image ref, starts the
// configured sandbox backend's plugin (kept in *host for the caller to
// close) and checks that it can run the image.
func installSandbox(ctx context.Context, dir string, cfg *config.Config, ref string, host **pluginhost.Host) (*installBox, error) {
	img, err := image.Resolve(dir, ref)
	if err != nil {
		return nil, err
	}
	limits, timeout, err := installLimits(cfg)
	if err != nil {
		return nil, err
	}
	if *host == nil {
		*host = pluginhost.New(pluginhost.Options{HomeDir: dir, LogOutput: termsafe.NewWriter(os.Stderr)})
	}
	backend := cfg.Sandbox.Backend
	client, err := (*host).Sandbox(ctx, backend)
	if err != nil {
		return nil, reason.New(reason.SandboxUnavailable, "sandbox backend %s: %w", backend, err)
	}
	av, err := client.Availability(ctx, &sandbox.AvailabilityRequest{Image: img.Ref, ImageStore: img.Store})
	if err != nil {
		return nil, reason.New(reason.SandboxUnavailable, "sandbox backend %s: %w", backend, err)
	}
	if !av.Available {
		return nil, reason.New(reason.SandboxUnavailable, "sandbox backend %s is unavailable: %s (%s)", backend, av.Reason, av.Detail)
	}
	return &installBox{client: client, backend: backend, img: img, limits: limits, timeout: timeout}, nil
}

// installFromIndex installs the Python dependencies from the index idx
// through a sealed egress proxy allowing its host alone (withEgress).
func installFromIndex(ctx context.Context, dir string, cfg *config.Config, host *pluginhost.Host, in *pydeps.Installer,
	idx pydeps.Index, m *manifest.Manifest, content string, reqs []string) ([]string, error) {
	return withEgress(ctx, dir, cfg, host, in.Backend, m, idx.Host,
		fmt.Sprintf("installing the dependencies of %s from %s", m.PackageID, idx.URL),
		func(ctx context.Context, socket string) ([]string, error) {
			idx.EgressSocket = socket
			in.Index = &idx
			return in.Install(ctx, content, reqs)
		})
}

// withEgress runs install with the socket of a sealed egress proxy that
// allows allow:443 alone (executor/egress, each connection audited as the
// package's, egress.OpenAudit) and stops the proxy after it; the install
// is cancelled if the proxy fails, and a teardown it cannot verify fails
// the install. A refusal by the proxy is named in install's error.
func withEgress(ctx context.Context, dir string, cfg *config.Config, host *pluginhost.Host, backend string, m *manifest.Manifest,
	allow, what string, install func(ctx context.Context, socket string) ([]string, error)) ([]string, error) {
	domains := []string{allow}
	a, err := egress.OpenAudit(plan.EgressAudit{
		AuditDir: home.AuditDir(dir),
		Audit: audit.Options{MaxSizeBytes: cfg.Audit.MaxSizeMB << 20, MaxFiles: int(cfg.Audit.MaxFiles),
			Anchor: audit.HomeAnchor(home.AuditAnchorPath(dir))},
		Base: audit.Record{Package: m.PackageID, Version: m.Version, Placement: plan.PlacementSandbox,
			Backend: backend, Env: audit.Env{Root: os.Geteuid() == 0}},
	}, domains)
	if err != nil {
		return nil, err
	}
	eg, err := egress.Start(ctx, egress.Options{Plugins: host, Audit: a, Domains: domains, What: what})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-eg.Failed():
			cancel()
		case <-runCtx.Done():
		}
	}()
	installed, err := install(runCtx, eg.Socket())
	failedEarly := false
	select {
	case <-eg.Failed():
		failedEarly = true
	default:
	}
	cancel()
	stopErr := eg.Stop()
	if stopErr != nil {
		return nil, stopErr
	}
	if failedEarly {
		return nil, reason.New(reason.EgressDenied, "the egress proxy failed while the dependencies were installed; nothing was installed")
	}
	if err != nil {
		if denied := eg.Denied(); len(denied) > 0 {
			err = fmt.Errorf("%w (the egress proxy, allowing %s:443 only, refused: %s)", err, allow, strings.Join(denied, "; "))
		}
		return nil, err
	}
	return installed, nil
}

// installLimits are the sandbox limits of the configuration (pydeps
// raises /tmp and memory to its minimums).
func installLimits(cfg *config.Config) (sandbox.Limits, time.Duration, error) {
	l := cfg.Sandbox.Limits
	mem, err := l.MemoryBytes()
	if err != nil {
		return sandbox.Limits{}, 0, reason.New(reason.ConfigInvalid, "sandbox.limits.memory: %w", err)
	}
	tmp, err := l.TmpSizeBytes()
	if err != nil {
		return sandbox.Limits{}, 0, reason.New(reason.ConfigInvalid, "sandbox.limits.tmp_size: %w", err)
	}
	return sandbox.Limits{MemoryBytes: mem, Pids: l.Pids, CPUs: l.CPUs, TmpBytes: tmp},
		time.Duration(l.TimeoutSeconds) * time.Second, nil
}

// absWheelhouse is --wheelhouse as an absolute path ("" stays "").
func absWheelhouse(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	return filepath.Abs(dir)
}

// installerReport is what `sandbox build --python-installer --json` and
// `--node-installer --json` print.
type installerReport struct {
	image.Image
	Contents any `json:"contents"`
	// Config is what happened to the pinning key: "set" (it was absent),
	// "unchanged" or "kept" (it pins another image; Hint says how to
	// switch).
	Config  string       `json:"config"`
	Hint    string       `json:"hint,omitempty"`
	Engines []engineLoad `json:"engines"`
}

// buildPythonInstaller is `agentnode sandbox build --python-installer`:
// the Python installer image (pyimage.BuildInstaller) from this host's
// Debian packages, loaded into Docker and Podman when they are installed,
// pinned in sandbox.python_installer_image when that is absent.
func buildPythonInstaller(cmd *cobra.Command, jsonOut bool, busybox string) error {
	return buildInstaller(cmd, jsonOut, "sandbox.python_installer_image",
		"building the Python installer image from this host's Debian packages (this takes a while) …",
		func(dir string, cfg *config.Config) (*image.Image, any, string, error) {
			img, contents, err := pyimage.BuildInstaller(dir, pyimage.Options{Base: imagebuild.BuildOptions{BusyboxPath: busybox}})
			if err != nil {
				return nil, nil, "", err
			}
			return img, contents, fmt.Sprintf("%d Debian packages, %d files, %d bytes", len(contents.Packages), contents.Files, contents.Bytes), nil
		}, func(cfg *config.Config) string { return cfg.Sandbox.PythonInstallerImage })
}

// buildInstaller builds an installer image with build (which also says
// what it holds), loads it into Docker and Podman when they are installed
// and pins it in key (whose value current gives) when that is absent.
func buildInstaller(cmd *cobra.Command, jsonOut bool, key, start string,
	build func(dir string, cfg *config.Config) (*image.Image, any, string, error), current func(*config.Config) string) error {
	dir, cfgPath, cfg, err := sandboxConfig()
	if err != nil {
		return fail(cmd, jsonOut, err)
	}
	if !jsonOut {
		fmt.Fprintln(cmd.ErrOrStderr(), start)
	}
	img, contents, summary, err := build(dir, cfg)
	if err != nil {
		return fail(cmd, jsonOut, err)
	}
	engines := newImageEngines(dir)
	defer engines.close()
	rep := installerReport{Image: *img, Contents: contents, Engines: engines.load(cmd.Context(), img, nil)}
	switch current(cfg) {
	case img.Ref:
		rep.Config = "unchanged"
	case "":
		if err := configedit.Set(cfgPath, key, img.Ref); err != nil {
			return fail(cmd, jsonOut, err)
		}
		rep.Config = "set"
	default:
		rep.Config = "kept"
		rep.Hint = "agentnode config set " + key + " " + img.Ref
	}
	if jsonOut {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "image:     %s\n", img.Ref)
	fmt.Fprintf(w, "packages:  %s\n", summary)
	fmt.Fprintf(w, "rootfs:    %s\n", img.Rootfs)
	for _, l := range rep.Engines {
		if l.Loaded {
			fmt.Fprintf(w, "loaded into %s\n", l.Engine)
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: warning: not loaded into %s: %s\n", l.Engine, l.Error)
		}
	}
	switch rep.Config {
	case "set":
		fmt.Fprintf(w, "%s set to %s\n", key, img.Ref)
	case "unchanged":
		fmt.Fprintf(w, "%s already pins this image\n", key)
	default:
		fmt.Fprintf(w, "%s pins %s; to use the new image:\n  %s\n", key, current(cfg), rep.Hint)
	}
	return nil
}

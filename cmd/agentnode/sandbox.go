package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/cmd/agentnode/nodeimage"
	"github.com/agentnode/agentnode/cmd/agentnode/pyimage"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/reason"
)

func init() { register(newSandboxCmd) }

func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Build, inspect and pin the sandbox image",
		Long: `The sandbox image is built locally and reproducibly from the host's
statically linked busybox (Debian's busybox-static) and always addressed by
digest: sandbox.image pins name@sha256:<manifest digest>, and the digest is
checked before every sandboxed run. Images can be pulled by digest
(` + "`agentnode sandbox pull`" + `), never implicitly.
See specs/image.md.`,
	}
	cmd.AddCommand(newSandboxBuildCmd(), newSandboxStatusCmd(), newSandboxPullCmd())
	return cmd
}

// sandboxConfig returns the home directory and the config path and config,
// refusing when agentnode is not set up.
func sandboxConfig() (string, string, *config.Config, error) {
	dir, err := home.Dir()
	if err != nil {
		return "", "", nil, reason.New(reason.NotSetUp, "%w", err)
	}
	path := home.ConfigPath(dir)
	cfg, err := config.Load(path)
	if err != nil {
		return "", "", nil, err
	}
	return dir, path, cfg, nil
}

type buildReport struct {
	image.Image
	Tag string `json:"tag"`
	// Config is what happened to sandbox.image: "set" (it was the
	// placeholder), "unchanged" (already this image) or "kept" (it pins
	// another image; Hint says how to switch).
	Config  string       `json:"config"`
	Current string       `json:"configured_image"`
	Hint    string       `json:"hint,omitempty"`
	Engines []engineLoad `json:"engines"`
	// Python is the Python runtime image (--python).
	Python *pythonBuildReport `json:"python,omitempty"`
	// Node is the Node runtime image (--node).
	Node *nodeBuildReport `json:"node,omitempty"`
}

// runtimeBuildReport is a runtime image `sandbox build --python` or
// `--node` built and what happened to the config key pinning it
// (sandbox.python_image, sandbox.node_image).
type runtimeBuildReport struct {
	image.Image
	Tag string `json:"tag"`
	// Config is what happened to the key: "set" (it was not set),
	// "unchanged" or "kept" (it pins another image; Hint says how to
	// switch).
	Config  string       `json:"config"`
	Current string       `json:"configured_image"`
	Hint    string       `json:"hint,omitempty"`
	Engines []engineLoad `json:"engines"`
	Seconds float64      `json:"build_seconds"`
}

// pythonBuildReport is the Python runtime image with what went into it.
type pythonBuildReport struct {
	runtimeBuildReport
	Contents *pyimage.Contents `json:"contents"`
}

// nodeBuildReport is the Node runtime image with what went into it.
type nodeBuildReport struct {
	runtimeBuildReport
	Contents *nodeimage.Contents `json:"contents"`
}

func newSandboxBuildCmd() *cobra.Command {
	var jsonOut, withPython, withNode, pyInstaller, nodeInstaller bool
	var busybox string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the default sandbox image (and with --python, --node the runtime images), unpack and load them",
		Long: `build makes the default sandbox image from a statically linked busybox
(default /bin/busybox), writes it into the OCI layout under
AGENTNODE_HOME/images/oci, unpacks it read-only for libcontainer, and loads
it into the engines of the sandbox backends that keep images in one (Docker,
Podman: each backend plugin loads it, when its engine is installed; a load
failure is a warning). The same busybox always gives the same digest.

If sandbox.image is still the placeholder, it is set to the new image.
Otherwise it is left alone and the command to switch is printed.

--python also builds the Python runtime image agentnode/python, which
runtime: python tools run in when sandboxed: the default image's content
plus Debian's python3 and standard library taken from this host's installed
packages (python3-minimal, libpython3-stdlib; each file checked against
dpkg's checksums) and the tool shim, offline and reproducibly (the same
package versions give the same digest; specs/python.md). It takes tens of
seconds; progress goes to stderr. sandbox.python_image is set to it when
unset, else left alone with the command to switch printed.

--node also builds the Node runtime image agentnode/node, which MCP servers
started as [node, /pack/FILE, ...] run in when sandboxed: the default
image's content plus Debian's nodejs and its dependencies, downloaded as
.deb files by apt from the configured Debian archive (never this host's
installed nodejs), each checked against apt's index and its files against
the package's md5sums, unpacked without running any package script (the
same .deb files give the same digest; specs/image.md). The files are kept
in AGENTNODE_HOME/images/debs. sandbox.node_image is set to it when unset,
else left alone with the command to switch printed.

--node-installer builds only the Node installer image
agentnode/node-installer, in which install runs npm ci for mcp_server
packages with install.manager npm: the Node image's packages plus Debian's
npm and its dependencies, downloaded and checked the same way.
sandbox.node_installer_image is set to it when unset.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pyInstaller {
				return buildPythonInstaller(cmd, jsonOut, busybox) // pydeps.go
			}
			if nodeInstaller {
				return buildNodeInstaller(cmd, jsonOut, busybox) // npmdeps.go
			}
			dir, cfgPath, cfg, err := sandboxConfig()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			img, err := imagebuild.Build(dir, imagebuild.BuildOptions{BusyboxPath: busybox})
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			engines := newImageEngines(dir)
			defer engines.close()
			rep := buildReport{Image: *img, Tag: img.Tag(), Current: cfg.Sandbox.Image, Engines: engines.load(cmd.Context(), img, nil)}
			switch cfg.Sandbox.Image {
			case img.Ref:
				rep.Config = "unchanged"
			case config.PlaceholderImage:
				if err := configedit.Set(cfgPath, "sandbox.image", img.Ref); err != nil {
					return fail(cmd, jsonOut, err)
				}
				rep.Config, rep.Current = "set", img.Ref
			default:
				rep.Config = "kept"
				rep.Hint = "agentnode config set sandbox.image " + img.Ref
			}
			if withPython {
				py, err := buildPython(cmd, dir, cfgPath, cfg, busybox, engines)
				if err != nil {
					return fail(cmd, jsonOut, err)
				}
				rep.Python = py
			}
			if withNode {
				n, err := buildNode(cmd, dir, cfgPath, cfg, busybox, engines)
				if err != nil {
					return fail(cmd, jsonOut, err)
				}
				rep.Node = n
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			w, ew := cmd.OutOrStdout(), cmd.ErrOrStderr()
			fmt.Fprintf(w, "image:     %s\n", img.Ref)
			fmt.Fprintf(w, "tag:       %s\n", rep.Tag)
			fmt.Fprintf(w, "image ID:  %s (config digest)\n", img.ConfigDigest)
			fmt.Fprintf(w, "rootfs:    %s\n", img.Rootfs)
			fmt.Fprintf(w, "layout:    %s\n", img.Layout)
			printLoads(w, ew, rep.Engines)
			switch rep.Config {
			case "set":
				fmt.Fprintf(w, "sandbox.image set to %s\n", img.Ref)
			case "unchanged":
				fmt.Fprintln(w, "sandbox.image already pins this image")
			default:
				fmt.Fprintf(w, "sandbox.image pins %s; to use the new image:\n  %s\n", cfg.Sandbox.Image, rep.Hint)
			}
			if py := rep.Python; py != nil {
				fmt.Fprintf(w, "python image: %s\n", py.Ref)
				fmt.Fprintf(w, "  image ID:  %s (config digest)\n", py.ConfigDigest)
				fmt.Fprintf(w, "  rootfs:    %s\n", py.Rootfs)
				fmt.Fprintf(w, "  contents:  %d Debian packages, %d files, %.1f MB; built in %.1fs\n",
					len(py.Contents.Packages), py.Contents.Files, float64(py.Contents.Bytes)/1e6, py.Seconds)
				printRuntimeBuild(w, ew, "sandbox.python_image", &py.runtimeBuildReport)
			}
			if n := rep.Node; n != nil {
				fmt.Fprintf(w, "node image: %s\n", n.Ref)
				fmt.Fprintf(w, "  image ID:  %s (config digest)\n", n.ConfigDigest)
				fmt.Fprintf(w, "  rootfs:    %s\n", n.Rootfs)
				fmt.Fprintf(w, "  contents:  %d Debian packages, %d files, %.1f MB; built in %.1fs\n",
					len(n.Contents.Packages), n.Contents.Files, float64(n.Contents.Bytes)/1e6, n.Seconds)
				printRuntimeBuild(w, ew, "sandbox.node_image", &n.runtimeBuildReport)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&busybox, "busybox", imagebuild.DefaultBusybox, "statically linked busybox to build from")
	cmd.Flags().BoolVar(&withPython, "python", false, "also build the Python runtime image and pin sandbox.python_image")
	cmd.Flags().BoolVar(&withNode, "node", false, "also build the Node runtime image (Debian's nodejs, downloaded by apt) and pin sandbox.node_image")
	cmd.Flags().BoolVar(&pyInstaller, "python-installer", false,
		"build the Python installer image (Debian's Python and pip) that install uses for dependencies; pins sandbox.python_installer_image when unset")
	cmd.Flags().BoolVar(&nodeInstaller, "node-installer", false,
		"build the Node installer image (Debian's nodejs and npm) that install uses for npm dependencies; pins sandbox.node_installer_image when unset")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// buildPython builds the Python runtime image (cmd/agentnode/pyimage).
func buildPython(cmd *cobra.Command, dir, cfgPath string, cfg *config.Config, busybox string, engines *imageEngines) (*pythonBuildReport, error) {
	var contents *pyimage.Contents
	rep, err := buildRuntime(cmd, "python", cfgPath, "sandbox.python_image", cfg.Sandbox.PythonImage, engines,
		func(progress func(string)) (*image.Image, error) {
			img, c, err := pyimage.Build(dir, pyimage.Options{Base: imagebuild.BuildOptions{BusyboxPath: busybox}, Progress: progress})
			contents = c
			return img, err
		})
	if err != nil {
		return nil, err
	}
	return &pythonBuildReport{runtimeBuildReport: *rep, Contents: contents}, nil
}

// buildNode builds the Node runtime image (cmd/agentnode/nodeimage).
func buildNode(cmd *cobra.Command, dir, cfgPath string, cfg *config.Config, busybox string, engines *imageEngines) (*nodeBuildReport, error) {
	var contents *nodeimage.Contents
	rep, err := buildRuntime(cmd, "node", cfgPath, "sandbox.node_image", cfg.Sandbox.NodeImage, engines,
		func(progress func(string)) (*image.Image, error) {
			img, c, err := nodeimage.Build(cmd.Context(), dir, nodeimage.Options{Base: imagebuild.BuildOptions{BusyboxPath: busybox}, Progress: progress})
			contents = c
			return img, err
		})
	if err != nil {
		return nil, err
	}
	return &nodeBuildReport{runtimeBuildReport: *rep, Contents: contents}, nil
}

// buildRuntime runs build, telling stderr what it does (prefixed with
// label) and, while it works, every 10 s how long it has been at it; loads
// the image into the engines and pins key (whose value is current) when it
// is unset.
func buildRuntime(cmd *cobra.Command, label, cfgPath, key, current string, engines *imageEngines,
	build func(progress func(string)) (*image.Image, error)) (*runtimeBuildReport, error) {
	ew := cmd.ErrOrStderr()
	start := time.Now()
	done := make(chan struct{})
	ticker := time.NewTicker(10 * time.Second)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				fmt.Fprintf(ew, "%s image: still building (%ds)\n", label, int(time.Since(start).Seconds()))
			}
		}
	}()
	img, err := build(func(step string) { fmt.Fprintf(ew, "%s image: %s\n", label, step) })
	ticker.Stop()
	close(done)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("%s image: %w", label, err)
	}
	rep := &runtimeBuildReport{Image: *img, Tag: img.Tag(), Current: current, Seconds: time.Since(start).Seconds()}
	fmt.Fprintf(ew, "%s image: %s built in %.1fs\n", label, img.Ref, rep.Seconds)
	rep.Engines = engines.load(cmd.Context(), img, func(e string) { fmt.Fprintf(ew, "%s image: loading into %s\n", label, e) })
	switch current {
	case img.Ref:
		rep.Config = "unchanged"
	case "":
		if err := configedit.Set(cfgPath, key, img.Ref); err != nil {
			return nil, err
		}
		rep.Config, rep.Current = "set", img.Ref
	default:
		rep.Config = "kept"
		rep.Hint = "agentnode config set " + key + " " + img.Ref
	}
	return rep, nil
}

// printRuntimeBuild prints the loads of a runtime image and what happened
// to key.
func printRuntimeBuild(w, ew io.Writer, key string, r *runtimeBuildReport) {
	printLoads(w, ew, r.Engines)
	switch r.Config {
	case "set":
		fmt.Fprintf(w, "%s set to %s\n", key, r.Ref)
	case "unchanged":
		fmt.Fprintf(w, "%s already pins this image\n", key)
	default:
		fmt.Fprintf(w, "%s pins %s; to use the new image:\n  %s\n", key, r.Current, r.Hint)
	}
}

func printLoads(w, ew io.Writer, loads []engineLoad) {
	for _, l := range loads {
		if l.Loaded {
			fmt.Fprintf(w, "loaded into %s\n", l.Engine)
		} else {
			fmt.Fprintf(ew, "agentnode: warning: not loaded into %s: %s\n", l.Engine, l.Error)
		}
	}
}

// imageStatus is one image in the status report.
type imageStatus struct {
	image.Image
	Resolves bool   `json:"resolves"`
	Code     string `json:"code,omitempty"`
	Detail   string `json:"detail,omitempty"`
	// Engines maps the sandbox backends that keep images in an engine of
	// their own (docker, podman) to "present", "absent" or why it could not
	// be asked; backends whose engine is not installed are left out.
	Engines map[string]string `json:"engines"`
}

type statusReport struct {
	// OK is true when the configured image resolves (same as Resolves).
	OK         bool          `json:"ok"`
	Configured string        `json:"configured_image"`
	Resolves   bool          `json:"resolves"`
	Code       string        `json:"code,omitempty"`
	Detail     string        `json:"detail"`
	Images     []imageStatus `json:"images"`
	// Python is sandbox.python_image, the image of runtime: python tools.
	Python runtimeStatus `json:"python_image"`
	// Node is sandbox.node_image, the image of [node, /pack/FILE] MCP
	// servers.
	Node runtimeStatus `json:"node_image"`
}

// runtimeStatus is whether a runtime image key (sandbox.python_image,
// sandbox.node_image) is set and resolves.
type runtimeStatus struct {
	Configured string `json:"configured_image"` // "" when not set
	Resolves   bool   `json:"resolves"`
	Code       string `json:"code,omitempty"`
	Detail     string `json:"detail"`
}

// pythonImageStatus checks sandbox.python_image as a run would
// (image.Resolve); not set is sandbox_unavailable naming the command that
// builds it.
func pythonImageStatus(dir, ref string) (runtimeStatus, *image.Image) {
	return runtimeImageStatus(dir, ref, "runtime: python tools", "--python")
}

// nodeImageStatus checks sandbox.node_image like pythonImageStatus.
func nodeImageStatus(dir, ref string) (runtimeStatus, *image.Image) {
	return runtimeImageStatus(dir, ref, "MCP servers started with node", "--node")
}

func runtimeImageStatus(dir, ref, what, flag string) (runtimeStatus, *image.Image) {
	st := runtimeStatus{Configured: ref}
	if ref == "" {
		err := reason.New(reason.SandboxUnavailable,
			"not set: %s cannot run sandboxed; run `agentnode sandbox build %s`", what, flag)
		st.Code, st.Detail = string(reason.CodeOf(err)), err.Error()
		return st, nil
	}
	img, err := image.Resolve(dir, ref)
	if err != nil {
		st.Code, st.Detail = string(reason.CodeOf(err)), err.Error()
		return st, nil
	}
	st.Resolves, st.Detail = true, "OK: digests and rootfs verified"
	return st, img
}

func newSandboxStatusCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the configured image, whether it resolves, and the images on this machine",
		Long: `status shows sandbox.image and whether it resolves (the check made before
every run: pinned, present, digests and rootfs verified), the images in the
local OCI layout and which container engines have them, and the same for
sandbox.python_image (runtime: python tools) and sandbox.node_image (MCP
servers started with node). It exits 0 when the configured image resolves
(and sandbox.python_image and sandbox.node_image, when set) and 1 when it
does not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, _, cfg, err := sandboxConfig()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			rep := statusReport{Configured: cfg.Sandbox.Image, Images: []imageStatus{}}
			if _, err := image.Resolve(dir, cfg.Sandbox.Image); err != nil {
				rep.Code, rep.Detail = string(reason.CodeOf(err)), err.Error()
			} else {
				rep.OK, rep.Resolves, rep.Detail = true, true, "OK: digests and rootfs verified"
			}
			rep.Python, _ = pythonImageStatus(dir, cfg.Sandbox.PythonImage)
			rep.Node, _ = nodeImageStatus(dir, cfg.Sandbox.NodeImage)
			imgs, err := imagebuild.Status(dir)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			engines := newImageEngines(dir)
			defer engines.close()
			for _, img := range imgs {
				st := imageStatus{Image: img, Engines: map[string]string{}}
				if r, err := image.Resolve(dir, img.Ref); err != nil {
					st.Code, st.Detail = string(reason.CodeOf(err)), err.Error()
				} else {
					st.Image, st.Resolves = *r, true
				}
				if st.ConfigDigest != "" {
					st.Engines = engines.presence(cmd.Context(), &st.Image)
				}
				rep.Images = append(rep.Images, st)
			}
			if jsonOut {
				_ = writeJSON(cmd.OutOrStdout(), rep)
			} else {
				printStatus(cmd, &rep)
			}
			if !rep.Resolves || rep.Python.Configured != "" && !rep.Python.Resolves || rep.Node.Configured != "" && !rep.Node.Resolves {
				return exitWith(reason.ExitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func printStatus(cmd *cobra.Command, rep *statusReport) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "sandbox.image: %s\n", rep.Configured)
	if rep.Resolves {
		fmt.Fprintf(w, "resolves:      %s\n", rep.Detail)
	} else {
		fmt.Fprintf(w, "resolves:      no [%s] %s\n", rep.Code, rep.Detail)
	}
	for _, r := range []struct {
		key string
		st  *runtimeStatus
	}{{"sandbox.python_image", &rep.Python}, {"sandbox.node_image", &rep.Node}} {
		fmt.Fprintf(w, "%s: %s\n", r.key, orNone(r.st.Configured))
		if r.st.Resolves {
			fmt.Fprintf(w, "resolves:      %s\n", r.st.Detail)
		} else {
			fmt.Fprintf(w, "resolves:      no [%s] %s\n", r.st.Code, r.st.Detail)
		}
	}
	if len(rep.Images) == 0 {
		fmt.Fprintln(w, "images:        none (run `agentnode sandbox build`)")
		return
	}
	fmt.Fprintln(w, "images:")
	for _, img := range rep.Images {
		mark := "ok  "
		if !img.Resolves {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, img.Ref)
		fmt.Fprintf(w, "       image ID %s\n", orNone(img.ConfigDigest))
		fmt.Fprintf(w, "       rootfs   %s\n", orNone(img.Rootfs))
		if !img.Resolves {
			fmt.Fprintf(w, "       [%s] %s\n", img.Code, img.Detail)
		}
		for _, e := range slices.Sorted(maps.Keys(img.Engines)) {
			fmt.Fprintf(w, "       %-8s %s\n", e, img.Engines[e])
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

type pullReport struct {
	image.Image
	Tag string `json:"tag"`
	// Requested is the reference as given; for an image index Ref pins the
	// linux/amd64 manifest picked from it.
	Requested string `json:"requested"`
	Current   string `json:"configured_image"`
	// Hint is the command that pins the pulled image (pull never changes
	// sandbox.image); empty when it is already pinned.
	Hint string `json:"hint,omitempty"`
}

func newSandboxPullCmd() *cobra.Command {
	var jsonOut, insecure bool
	cmd := &cobra.Command{
		Use:   "pull REF@sha256:DIGEST",
		Short: "Fetch an image from a registry by digest (never by tag)",
		Long: `pull fetches an image by its manifest digest only, never by tag
(NAME:TAG@sha256:... is accepted and the tag ignored), anonymously, verifies
every blob against its digest, writes it into the OCI layout under
AGENTNODE_HOME/images/oci and unpacks it read-only exactly as build does. An
image index is resolved to its linux/amd64 manifest. Plain HTTP, including to
localhost, needs --insecure-registry.

sandbox.image is never changed: the command to pin the image is printed.
Nothing is ever pulled implicitly.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, _, cfg, err := sandboxConfig()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			ref := args[0]
			img, err := imagebuild.Pull(dir, ref, imagebuild.PullOptions{Insecure: insecure, Context: cmd.Context()})
			if errors.Is(err, reason.ErrImageUnpinned) {
				return fail(cmd, jsonOut, usageError("%v", err))
			}
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			rep := pullReport{Image: *img, Tag: img.Tag(), Requested: ref, Current: cfg.Sandbox.Image}
			if cfg.Sandbox.Image != img.Ref {
				rep.Hint = "agentnode config set sandbox.image " + img.Ref
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "image:     %s\n", img.Ref)
			if img.Ref != ref {
				fmt.Fprintf(w, "requested: %s\n", ref)
			}
			fmt.Fprintf(w, "image ID:  %s (config digest)\n", img.ConfigDigest)
			fmt.Fprintf(w, "rootfs:    %s\n", img.Rootfs)
			fmt.Fprintf(w, "layout:    %s\n", img.Layout)
			if rep.Hint == "" {
				fmt.Fprintln(w, "sandbox.image already pins this image")
			} else {
				fmt.Fprintf(w, "sandbox.image pins %s; to use the pulled image:\n  %s\n", cfg.Sandbox.Image, rep.Hint)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().BoolVar(&insecure, "insecure-registry", false, "allow plain HTTP to the registry (needed for localhost too)")
	return cmd
}

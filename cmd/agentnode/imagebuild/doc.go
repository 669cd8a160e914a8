// Package imagebuild builds and pulls agentnode's sandbox images: the front
// end of `agentnode sandbox build` and `agentnode sandbox pull`. The kernel
// does not import it; it only verifies, before every run, what this package
// wrote (kernel/image.Resolve).
//
// The default image is built locally and reproducibly from the host's
// statically linked busybox (Debian's busybox-static) with
// go-containerregistry: one layer, fixed timestamps and ownership, sorted
// tar entries, deterministic gzip and a fixed image config, so the same
// busybox bytes always give the same manifest digest. Built and pulled
// images are written into the OCI layout of the image store
// (kernel/image.LayoutDir) and unpacked, read-only, for libcontainer, with
// a tree hash recorded beside each rootfs (kernel/image.Marker). Loading
// an image into Docker or Podman is the backend plugins' work
// (sandbox.ImageLoader); cmd/agentnode calls it. specs/image.md describes
// the image and the layout.
package imagebuild

// Command pybuild builds the Python runtime image (cmd/agentnode/pyimage),
// or with -installer the Python installer image, into an agentnode home and
// prints the image and what went into it as JSON. It is how developers and the pyimage tests build the image (the
// tests run it as a separate program so that the race detector does not
// instrument 50 MB of gzip) until `agentnode sandbox build` can.
//
//	pybuild -home DIR [-installer] [-busybox PATH] [-forwarder PATH]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/cmd/agentnode/pyimage"
	"github.com/agentnode/agentnode/kernel/image"
)

func main() {
	home := flag.String("home", "", "agentnode home to build into (required)")
	busybox := flag.String("busybox", imagebuild.DefaultBusybox, "statically linked busybox")
	forwarder := flag.String("forwarder", "", "egress forwarder (default: beside this program)")
	installer := flag.Bool("installer", false, "build the Python installer image (pip) instead")
	flag.Parse()
	if *home == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	opts := pyimage.Options{
		Base: imagebuild.BuildOptions{BusyboxPath: *busybox, ForwarderPath: *forwarder},
	}
	if *installer {
		opts = pyimage.InstallerOptions(opts)
	}
	img, contents, err := pyimage.Build(*home, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pybuild:", err)
		os.Exit(1)
	}
	out, err := json.Marshal(struct {
		Image    *image.Image      `json:"image"`
		Contents *pyimage.Contents `json:"contents"`
	}{img, contents})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pybuild:", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

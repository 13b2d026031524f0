// Command image assembles the manager's OCI image without a container
// engine: no base image is pulled, every layer is built here from files of
// this machine (the CA bundle) and of the build (the static manager
// binaries, one per platform, built by `make image` with the flags of
// `make build-static`). It writes a multi-platform image index as an OCI
// image layout directory and as a tarball of that layout (oci-archive), and
// pushes the index to a registry when -push is set.
//
//	go run . -name ghcr.io/runbook-dev/runbook-manager:v0.1.0 -out ../../bin/image \
//	  -binary linux/amd64=../../bin/image/manager-linux-amd64 \
//	  -binary linux/arm64=../../bin/image/manager-linux-arm64
//
// `go run . node-images` (make node-images) builds the images of the local
// real node instead, one OCI archive each and an images.json naming them by
// digest: the manager, memcached from Debian's package with exactly the
// libraries it links, the demo web server (./web) and the sandbox's pause
// (./pause).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// binaryFlags collects repeated -binary os/arch=path flags.
type binaryFlags []platformBinary

func (b *binaryFlags) String() string { return fmt.Sprint(*b) }

func (b *binaryFlags) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	osName, arch, ok := strings.Cut(platform, "/")
	if !ok || osName == "" || arch == "" {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	*b = append(*b, platformBinary{OS: osName, Arch: arch, Path: path})
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "node-images" {
		if err := nodeImagesMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "image:", err)
			os.Exit(1)
		}
		return
	}
	var bins binaryFlags
	name := flag.String("name", "", "image reference the index is tagged with (org.opencontainers.image.ref.name), e.g. ghcr.io/runbook-dev/runbook-manager:v0.1.0")
	out := flag.String("out", "", "output directory: oci/ (OCI image layout) and <name>.oci.tar are written into it")
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates copied to /etc/ssl/certs/ca-certificates.crt")
	created := flag.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time of the image, Unix seconds (default: SOURCE_DATE_EPOCH, else 0); file times in the layers use it too")
	revision := flag.String("revision", "", "source revision recorded in the org.opencontainers.image.revision label")
	buildFlags := flag.String("build-flags", `-trimpath -tags grpcnotrace -ldflags="-s -w"`, "the go build flags of the binaries, recorded in the image's history (make image passes the Makefile's STATIC_BUILD_FLAGS)")
	push := flag.Bool("push", false, "also push the index to the registry named by -name (credentials from the Docker config, as `docker login` writes it)")
	flag.Var(&bins, "binary", "os/arch=path of the manager built for that platform; repeat once per platform")
	flag.Parse()
	if err := run(*name, *out, *caBundle, *created, *revision, *buildFlags, *push, bins); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(name, out, caBundle, created, revision, buildFlags string, push bool, bins []platformBinary) error {
	if name == "" || out == "" || len(bins) == 0 {
		return errors.New("-name, -out and at least one -binary are required")
	}
	when := time.Unix(0, 0).UTC()
	if created != "" {
		sec, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: want Unix seconds: %w", created, err)
		}
		when = time.Unix(sec, 0).UTC()
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return fmt.Errorf("reading the CA bundle (the image's only trust store; install Debian's ca-certificates or pass -ca-bundle): %w", err)
	}
	spec := Spec{Name: name, Created: when, Revision: revision, CABundle: ca, Binaries: bins, BuildFlags: buildFlags}
	idx, err := Build(spec)
	if err != nil {
		return err
	}
	res, err := WriteOutputs(idx, spec, out)
	if err != nil {
		return err
	}
	fmt.Printf("image %s\n  index digest %s\n  OCI layout   %s\n  oci-archive  %s (%d bytes)\n", name, res.Digest, res.LayoutDir, res.Archive, res.ArchiveSize)
	for _, m := range res.Manifests {
		fmt.Printf("  %-12s %s, %d bytes compressed\n", m.Platform, m.Digest, m.CompressedSize)
	}
	if push {
		if err := Push(idx, name); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", name, res.Digest)
	}
	return nil
}

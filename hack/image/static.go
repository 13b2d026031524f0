package main

import (
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// staticProgram is an image made of one static Go program of this module
// (web, pause): no libc, no loader, no shell.
type staticProgram struct {
	name, description string
	path              string // where the binary is in the image
	uid               int
	users             bool // a base layer with passwd, group and /tmp
	// source is the package built, as the history records it ("./<name>
	// in hack/image" when empty).
	source string
}

var (
	webProgram = staticProgram{name: "web", path: "/web", uid: nonRootUID, users: true,
		description: "Runbook's demo web server: its environment, one file, /healthz"}
	pauseProgram = staticProgram{name: "pause", path: "/pause", uid: 65535,
		description: "Runbook's pause: holds a pod sandbox's namespaces until SIGTERM or SIGINT"}
	// tlsAgentProgram runs beside memcached (the pod sets memcache's uid).
	tlsAgentProgram = staticProgram{name: "memcached-tls-agent", path: "/memcached-tls-agent", uid: nonRootUID,
		source:      "./cmd/memcached-tls-agent of the root module",
		description: "Runbook's memcached TLS agent: loads a renewed certificate into the pod's memcached (refresh_certs)"}
)

// buildStatic assembles the image of p from its binary for arch.
func buildStatic(p staticProgram, bin platformBinary, created time.Time, buildFlags string) (v1.Image, error) {
	data, err := os.ReadFile(bin.Path)
	if err != nil {
		return nil, err
	}
	if err := checkStaticELF(data, bin.Arch); err != nil {
		return nil, fmt.Errorf("%s: %w", bin.Path, err)
	}
	var parts []layerPart
	if p.users {
		base, err := layerOf([]file{
			{name: "/etc", mode: 0o755, dir: true},
			{name: "/etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", p.uid, p.uid)},
			{name: "/etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", p.uid)},
			{name: "/home", mode: 0o755, dir: true},
			{name: "/home/nonroot", mode: 0o700, uid: p.uid, gid: p.uid, dir: true},
			{name: "/tmp", mode: 0o1777, dir: true},
		}, created)
		if err != nil {
			return nil, err
		}
		parts = append(parts, layerPart{layer: base, comment: "base", createdBy: "hack/image: passwd, group, /tmp, /home/nonroot"})
	}
	l, err := layerOf([]file{{name: p.path, mode: 0o755, data: data}}, created)
	if err != nil {
		return nil, err
	}
	parts = append(parts, layerPart{layer: l, comment: p.name,
		createdBy: fmt.Sprintf("hack/image: %s (CGO_ENABLED=0 go build %s %s)", p.path, buildFlags, p.sourceOrDefault())})
	return assemble(bin.OS, bin.Arch, created, parts, v1.Config{
		User:       fmt.Sprintf("%d:%d", p.uid, p.uid),
		Entrypoint: []string{p.path},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "runbook-" + p.name,
			"org.opencontainers.image.description": p.description,
			"org.opencontainers.image.source":      sourceURL,
			"org.opencontainers.image.licenses":    "Apache-2.0",
		},
	})
}

func (p staticProgram) sourceOrDefault() string {
	if p.source != "" {
		return p.source
	}
	return "./" + p.name + " in hack/image"
}

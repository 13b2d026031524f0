package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Supported says why this machine cannot run a real node, or nil: root (the
// node creates namespaces, a veth pair, mounts and iptables rules), and the
// Debian tools it uses (runc, the CNI plugins, iptables, ip, nsenter, unshare).
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (namespaces, mounts, iptables)")
	}
	for _, f := range []string{runcBinary, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s is missing: apt-get install runc containernetworking-plugins (`make node-binaries` does it as root)", f)
		}
	}
	for _, tool := range []string{"iptables", "iptables-restore", "ip", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH: apt-get install iptables iproute2 util-linux", tool)
		}
	}
	return nil
}

// Available says why a node with these options could not start here, or nil:
// Supported, the node's binaries (make node-binaries) and an images.json
// naming a pause image. Empty folders mean the repository's defaults.
func Available(binDir, imagesDir string) error {
	if err := Supported(); err != nil {
		return err
	}
	o := Options{Kubeconfig: "-", ClientCA: "-", ServiceCIDR: "-", BinDir: binDir, ImagesDir: imagesDir}
	if err := o.defaults(); err != nil {
		return err
	}
	catalog, err := readCatalog(o.ImagesDir)
	if err != nil {
		return err
	}
	if _, ok := catalog["pause"]; !ok {
		return fmt.Errorf("%s names no pause image", filepath.Join(o.ImagesDir, catalogFile))
	}
	return nil
}

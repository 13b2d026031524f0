package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// catalogFile lists the images the node imports: {"<name>": {"ref":
// "<reference pods use>", "archive": "<OCI archive in the same folder>"}}.
const catalogFile = "images.json"

type catalogEntry struct {
	Ref     string `json:"ref"`
	Archive string `json:"archive"`
}

func readCatalog(dir string) (map[string]catalogEntry, error) {
	p := filepath.Join(dir, catalogFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("the real node's images: %w (build them into %s first)", err, dir)
	}
	var c map[string]catalogEntry
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	for name, e := range c {
		if e.Ref == "" || e.Archive == "" || filepath.Base(e.Archive) != e.Archive {
			return nil, fmt.Errorf("%s: image %q needs a ref and an archive file name in the same folder", p, name)
		}
	}
	return c, nil
}

// importImages imports every archive into containerd's Kubernetes namespace
// and checks that the kubelet finds each by the exact reference pods use
// (nothing can be pulled: pods use imagePullPolicy IfNotPresent or Never).
func (n *Node) importImages(ctx context.Context, catalog map[string]catalogEntry) (map[string]string, error) {
	names := make([]string, 0, len(catalog))
	for name := range catalog {
		names = append(names, name)
	}
	sort.Strings(names)
	refs := map[string]string{}
	for _, name := range names {
		e := catalog[name]
		out, err := n.ctr(ctx, "images", "import", filepath.Join(n.opts.ImagesDir, e.Archive))
		if err != nil {
			return nil, fmt.Errorf("importing image %s: %w", name, err)
		}
		if err := n.ensureRef(ctx, e.Ref, importedNames(out)); err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		refs[name] = e.Ref
	}
	return refs, nil
}

// ensureRef makes ref resolve through the CRI. The CRI finds an image by
// digest only under a name of the form repo@digest, which ctr's import does
// not create (its --digests names a synthesized index instead), so the image
// the archive named repo:tag is also tagged repo@digest.
func (n *Node) ensureRef(ctx context.Context, ref string, imported []string) error {
	// The CRI learns of imported images from containerd's events: give it
	// a moment before deciding the reference is unknown.
	if n.criFinds(ctx, ref, 5*time.Second) {
		return nil
	}
	src, target := ref, ref
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		src = ref[:i]
		target = trimTag(src) + ref[i:]
	}
	if !slices.Contains(imported, src) {
		if len(imported) != 1 {
			return fmt.Errorf("imported as %v, none of which is %s", imported, src)
		}
		src = imported[0]
	}
	if src != target {
		if _, err := n.ctr(ctx, "images", "tag", "--force", src, target); err != nil {
			return err
		}
	}
	if !n.criFinds(ctx, ref, 10*time.Second) {
		return fmt.Errorf("imported as %v and tagged %s, still not found as %s", imported, target, ref)
	}
	return nil
}

// criFinds says whether the CRI resolves ref within timeout.
func (n *Node) criFinds(ctx context.Context, ref string, timeout time.Duration) bool {
	return waitFor(ctx, timeout, "the CRI to find "+ref, func() error {
		_, err := n.Crictl(ctx, "inspecti", ref)
		return err
	}) == nil
}

// trimTag drops the :tag of repo:tag (a registry's :port stays).
func trimTag(name string) string {
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[:i]
	}
	return name
}

// importedNames reads the "<name>   saved" lines of ctr images import (its
// progress display may share a line with them, separated by carriage returns).
func importedNames(out string) []string {
	var names []string
	for _, l := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		f := strings.Fields(l)
		if len(f) >= 2 && f[len(f)-1] == "saved" && !slices.Contains(names, f[0]) {
			names = append(names, f[0])
		}
	}
	return names
}

func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	all := append([]string{filepath.Join(n.opts.BinDir, "ctr"), "--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)
	return run(ctx, n.env(), n.nodeCommand(all...)...)
}

// Crictl runs crictl against the node's containerd and returns its stdout.
func (n *Node) Crictl(ctx context.Context, args ...string) (string, error) {
	all := append([]string{filepath.Join(n.opts.BinDir, "crictl"), "--config", n.path("crictl.yaml"), "--timeout", "30s"}, args...)
	return run(ctx, n.env(), n.nodeCommand(all...)...)
}

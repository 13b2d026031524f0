package realnode

import (
	"fmt"
	"path/filepath"
)

// ImageRef is the reference pods use for the image name of the default
// images.json (bin/node-images), known before any node starts: for a
// manager flag that names an image the node will hold.
func ImageRef(name string) (string, error) {
	dir := filepath.Join(repoRoot(), "bin", "node-images")
	catalog, err := readCatalog(dir)
	if err != nil {
		return "", err
	}
	e, ok := catalog[name]
	if !ok {
		return "", fmt.Errorf("%s names no %s image (make node-images)", filepath.Join(dir, catalogFile), name)
	}
	return e.Ref, nil
}

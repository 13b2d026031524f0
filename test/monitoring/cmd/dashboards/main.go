// Command dashboards writes Runbook's Grafana dashboards (package
// dashboards) as JSON into a directory: `make dashboards` runs it for
// config/grafana/dashboards.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/runbook-dev/runbook/test/monitoring/dashboards"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboards DIR")
		os.Exit(2)
	}
	for _, d := range dashboards.All() {
		b, err := d.JSON()
		if err == nil {
			err = os.WriteFile(filepath.Join(os.Args[1], d.File), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashboards: %s: %v\n", d.File, err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s (%d panels)\n", filepath.Join(os.Args[1], d.File), len(d.Panels()))
	}
}

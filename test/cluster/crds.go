package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// WaitCRDsEstablished waits until every CRD of the cluster says
// Established=True. `kubectl wait --for=condition=Established crd --all`
// fails instead of waiting when it reads a CRD the apiserver has not given
// any condition yet (seen on a fresh cluster on a busy machine), so this
// polls the conditions itself.
func (c *Cluster) WaitCRDsEstablished(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	const jsonpath = `{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Established")].status}{"\n"}{end}`
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var waiting []string
	for {
		out, err := c.Kubectl(ctx, "get", "crd", "-o", "jsonpath="+jsonpath)
		if err == nil {
			if waiting = notEstablished(out); len(waiting) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for the CRDs: %w", err)
			}
			return fmt.Errorf("CRDs not Established after %s: %s", timeout, strings.Join(waiting, ", "))
		case <-tick.C:
		}
	}
}

// notEstablished reads lines of name=status and lists the names whose
// status is not True.
func notEstablished(out string) []string {
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, status, _ := strings.Cut(line, "=")
		if name != "" && status != "True" {
			names = append(names, name)
		}
	}
	return names
}

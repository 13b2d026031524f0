package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// KubectlFunc runs kubectl against one cluster and returns its stdout.
type KubectlFunc func(ctx context.Context, args ...string) (string, error)

// WaitCRDsEstablished waits until every CRD of the cluster says
// Established=True.
func (c *Cluster) WaitCRDsEstablished(ctx context.Context, timeout time.Duration) error {
	return WaitEstablished(ctx, timeout, c.Kubectl)
}

// WaitEstablished waits until the named CRDs (every CRD when none is
// named) say Established=True. `kubectl wait --for=condition=Established`
// fails instead of waiting when it reads a CRD the apiserver has not given
// any condition yet (seen on a fresh cluster on a busy machine), so this
// polls the conditions itself.
func WaitEstablished(ctx context.Context, timeout time.Duration, kubectl KubectlFunc, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	const jsonpath = `{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Established")].status}{"\n"}{end}`
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var waiting []string
	for {
		out, err := kubectl(ctx, "get", "crd", "-o", "jsonpath="+jsonpath)
		if err == nil {
			if waiting = notEstablished(out, names); len(waiting) == 0 {
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
// status is not True, among want (all of them when want is empty). A name
// in want that is not listed at all is not Established either.
func notEstablished(out string, want []string) []string {
	status := map[string]string{}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, s, _ := strings.Cut(line, "=")
		if name != "" {
			status[name] = s
			names = append(names, name)
		}
	}
	if len(want) > 0 {
		names = want
	}
	var waiting []string
	for _, name := range names {
		if status[name] != "True" {
			waiting = append(waiting, name)
		}
	}
	return waiting
}

package nsscaler

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// requestCounts are the apiserver's requests to resources by "VERB
// resource" (apiserver_request_total, every code), without what the
// apiserver itself writes in the background (its identity lease) and the
// review requests of authentication, and without requests to non-resource
// paths (/metrics, /healthz). A watch is counted when it ends.
type requestCounts map[string]int

// writes are the mutating requests, reads the others.
func (rc requestCounts) writes() requestCounts { return rc.where(true) }
func (rc requestCounts) reads() requestCounts  { return rc.where(false) }

func (rc requestCounts) where(mutating bool) requestCounts {
	out := requestCounts{}
	for k, v := range rc {
		verb, _, _ := strings.Cut(k, " ")
		if isMutating(verb) == mutating {
			out[k] = v
		}
	}
	return out
}

func isMutating(verb string) bool {
	switch verb {
	case "PATCH", "POST", "PUT", "DELETE", "APPLY", "DELETECOLLECTION":
		return true
	}
	return false
}

// since is what was requested between before and rc.
func (rc requestCounts) since(before requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range rc {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func total(rc requestCounts) int {
	n := 0
	for _, v := range rc {
		n += v
	}
	return n
}

// deploymentWrites is every write to Deployments, whatever the verb.
func deploymentWrites(rc requestCounts) int {
	n := 0
	for k, v := range rc {
		if _, resource, _ := strings.Cut(k, " "); resource == "deployments" || strings.HasPrefix(resource, "deployments/") {
			n += v
		}
	}
	return n
}

func describe(rc requestCounts) string {
	m := map[string]int{}
	for k, v := range rc {
		if v != 0 {
			m[k] = v
		}
	}
	return benchkit.Describe(m)
}

func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// requests reads the apiserver's request counters.
func requests(ctx context.Context, b *testing.B, cs kubernetes.Interface) requestCounts {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rc := requestCounts{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		verb, resource := label(line, "verb"), label(line, "resource")
		switch resource {
		case "", "leases", "subjectaccessreviews", "tokenreviews", "selfsubjectaccessreviews":
			continue
		}
		if sub := label(line, "subresource"); sub != "" {
			resource += "/" + sub
		}
		rc[verb+" "+resource] += int(v)
	}
	return rc
}

// nonDeployment is every write but those to Deployments.
func nonDeployment(rc requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range rc {
		if _, resource, _ := strings.Cut(k, " "); resource != "deployments" && !strings.HasPrefix(resource, "deployments/") {
			out[k] = v
		}
	}
	return out
}

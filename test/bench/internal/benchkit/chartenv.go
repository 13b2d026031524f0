package benchkit

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/testenv"
)

// chartValues is the part of charts/runbook/values.yaml that sets the
// manager's Go runtime environment.
type chartValues struct {
	Resources struct {
		Limits map[string]string `json:"limits"`
	} `json:"resources"`
	GoRuntime struct {
		MemoryLimitFromResources bool   `json:"memoryLimitFromResources"`
		GOGC                     string `json:"gogc"`
	} `json:"goRuntime"`
}

// ChartRuntimeEnv is the Go runtime environment the Helm chart gives the
// manager with its default values: GOMEMLIMIT the container's memory limit
// in bytes (what the downward API's resourceFieldRef yields) and GOGC as
// the chart sets it (empty: Go's default). Read from the chart, so that a
// benchmark measures the manager as a default install runs it.
func ChartRuntimeEnv() (map[string]string, error) {
	path := filepath.Join(testenv.RepoRoot(), "charts", "runbook", "values.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v chartValues
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	env := map[string]string{"GOMEMLIMIT": "", "GOGC": strings.TrimSpace(v.GoRuntime.GOGC)}
	if v.GoRuntime.MemoryLimitFromResources {
		q, err := resource.ParseQuantity(v.Resources.Limits["memory"])
		if err != nil {
			return nil, fmt.Errorf("%s: resources.limits.memory: %w", path, err)
		}
		env["GOMEMLIMIT"] = strconv.FormatInt(q.Value(), 10)
	}
	return env, nil
}

// UseChartRuntimeEnv sets ChartRuntimeEnv in the environment for the rest
// of b, so that a manager started afterwards runs as the chart runs it
// whatever the benchmark's own environment says (an empty GOGC or
// GOMEMLIMIT is Go's default). It returns the settings for the SUMMARY.
func UseChartRuntimeEnv(b testing.TB) string {
	b.Helper()
	env, err := ChartRuntimeEnv()
	if err != nil {
		b.Fatalf("the chart's runtime environment: %v", err)
	}
	var shown []string
	for _, k := range []string{"GOMEMLIMIT", "GOGC"} {
		b.Setenv(k, env[k])
		shown = append(shown, k+"="+cmp.Or(env[k], "(Go's default)"))
	}
	return strings.Join(shown, " ")
}

package nsscaler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// protobufConfig is the manager's config asking for protobuf, which the
// built-in kinds speak: cheaper to encode in the apiserver and to decode here
// than JSON. Custom resources fall back to JSON automatically.
func protobufConfig(mgr ctrl.Manager) *rest.Config {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// newWorkloadClient is the client for workload patches: the manager's HTTP
// client and mapper, protobuf responses. Its only client-side rate limit is
// qps when positive: otherwise the write concurrency bounds it, and the
// apiserver's priority and fairness protects the server. The manager's
// --kube-api-qps token bucket would make a park of thousands of workloads
// take thousands/qps seconds however idle the apiserver is.
func newWorkloadClient(mgr ctrl.Manager, qps float64) (client.Client, error) {
	c, err := client.New(writerRateLimit(protobufConfig(mgr), qps), client.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("building the nsscaler workload client: %w", err)
	}
	return c, nil
}

// writerRateLimit sets cfg's client-side rate limit: qps when positive, none
// otherwise (client-go treats a negative QPS as no token bucket).
func writerRateLimit(cfg *rest.Config, qps float64) *rest.Config {
	cfg.QPS, cfg.Burst = -1, 0
	if qps > 0 {
		cfg.QPS, cfg.Burst = float32(qps), max(1, int(qps))
	}
	return cfg
}

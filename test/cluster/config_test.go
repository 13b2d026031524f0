package cluster

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// A cluster for a real node: the apiserver's certificate names the
// kubernetes Service's IP (in-cluster clients verify it) and the apiserver
// publishes no endpoint of its own (each real node publishes its forwarder).
func TestForRealNodeConfig(t *testing.T) {
	cl, config, err := newCluster(Options{ForRealNode: true, NamePrefix: "cfgtest"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(cl.workdir) })
	var c struct {
		Options struct {
			KubeApiserverCertSANs []string `json:"kubeApiserverCertSANs"`
			BindAddress           string   `json:"bindAddress"`
		} `json:"options"`
		ComponentsPatches []struct {
			Name      string `json:"name"`
			ExtraArgs []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"extraArgs"`
		} `json:"componentsPatches"`
	}
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Options.KubeApiserverCertSANs, []string{KubernetesServiceIP}) || c.Options.BindAddress != "127.0.0.1" {
		t.Fatalf("options %+v\n%s", c.Options, data)
	}
	none := false
	for _, p := range c.ComponentsPatches {
		for _, a := range p.ExtraArgs {
			none = none || (p.Name == "kube-apiserver" && a.Key == "endpoint-reconciler-type" && a.Value == "none")
		}
	}
	if !none {
		t.Fatalf("the apiserver keeps its endpoint reconciler:\n%s", data)
	}
}

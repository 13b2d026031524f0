package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/runbook-dev/runbook/test/testenv"
)

// printStatus shows the plugin's view of the demo: `kubectl runbook status -A`.
func (d *demo) printStatus(ctx context.Context, kubeconfig string) {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "kubectl"), "runbook", "status", "-A")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Join(d.root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	_, _ = fmt.Fprintf(d.out, "\n$ kubectl runbook status -A\n%s", out)
	if err != nil {
		_, _ = fmt.Fprintf(d.out, "(kubectl runbook status: %v)\n", err)
	}
}

// The demo's tenant: hack/demo/workloads.yaml binds her to the built-in edit
// role in that namespace only, which the NSScaler sample parks and lets its
// team wake (spec.selfService).
const (
	demoTenant          = "jane"
	demoTenantNamespace = "proj-c"
)

func (d *demo) printTryIt(kubeconfig string, real bool) {
	bin := filepath.Join(d.root, "bin")
	realLine := "Real containers:           none (kwok only: pods are simulated)"
	if real {
		realLine = "A real container's output: kubectl logs deployment/nginx   # nginx runs on node real-node: kubectl get pods -o wide"
	}
	_, _ = fmt.Fprintf(d.out, `
Runbook is running against a local cluster. In another terminal:

  export KUBECONFIG=%[1]s
  export PATH=%[2]s:%[3]s:$PATH     # kubectl, and the kubectl-runbook plugin

The seed demo: watch nginx, then change a row of demo_tbl; nginx restarts once (within 5 s):
  kubectl get pods -l app=nginx -w
  mariadb -h 127.0.0.1 -u root test -e "%[4]s"

What Runbook is doing:      kubectl runbook status -A
Make a probe fail:          curl -X POST http://%[5]s/fail/http   # or tcp, grpc; heal with /heal/http
                            (after failureThreshold failures in a row nginx restarts: kubectl get events -w)
Fire a policy by hand:      kubectl runbook restart nginx-on-demo-tbl --wait
Parked by the NSScaler:     kubectl get deployments -n proj-a   # 0/0, original in an annotation
Wake it for a while:        kubectl runbook wake proj-a --for 2h   # kubectl runbook park proj-a ends it
Wake %[11]s as its team:    kubectl --as %[10]s -n %[11]s create -f %[9]s   # %[10]s may edit %[11]s, nothing else
                            kubectl get wakerequest -n %[11]s   # Granted, and until when; kubectl get deployments -n %[11]s: api 2/2 again
                            kubectl --as %[10]s -n %[11]s delete wakerequest evening-debugging   # %[11]s is parked again
                            (the plugin asks the same way and waits for the answer: kubectl runbook wake %[11]s --for 1h --as %[10]s)
%[8]s
Logs: %[6]s (manager), %[7]s (this output)
Press Ctrl-C to stop and tear everything down.

`, kubeconfig, testenv.BinDir(), bin, demoUpdate, d.health.addrs.http, filepath.Join(d.stateDir, "manager.log"), filepath.Join(d.stateDir, "demo.log"), realLine,
		filepath.Join(d.root, "config", "samples", "scaling_v1alpha1_wakerequest.yaml"), demoTenant, demoTenantNamespace)
}

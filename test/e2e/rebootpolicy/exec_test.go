package rebootpolicy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestExecTrigger: an allowed script in --exec-probe-dir fails after a flag
// file appears; the Deployment is restarted once.
func TestExecTrigger(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "exec")
	flag := filepath.Join(execDir, ns+".broken")
	script := "check-" + ns + ".sh"
	g.Expect(os.WriteFile(filepath.Join(execDir, script), []byte("#!/bin/sh\n[ ! -e '"+flag+"' ]\n"), 0o755)).To(Succeed())

	g.Expect(k8s.Create(ctx, nginxDeployment(ns, "web", 2))).To(Succeed())
	before := waitRunning(t, ns, "web", 2)
	g.Expect(k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-health"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			Policies: []autorebootv1alpha1.Policy{{
				Name: "script",
				Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{script}}},
					PeriodSeconds:    1,
					TimeoutSeconds:   1,
					FailureThreshold: 2,
				}},
			}},
		},
	})).To(Succeed())
	waitBaseline(t, ns, "web-health")
	g.Consistently(func(g Gomega) {
		g.Expect(restartCount(g, ns, "web-health")).To(BeZero())
	}, 5*time.Second, time.Second).Should(Succeed())

	g.Expect(os.WriteFile(flag, nil, 0o644)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(restartCount(g, ns, "web-health")).To(Equal(int64(1)))
	}, timeout, interval).Should(Succeed())
	g.Expect(os.Remove(flag)).To(Succeed())
	waitReplaced(t, ns, "web", 2, before)
	g.Consistently(func(g Gomega) {
		g.Expect(restartCount(g, ns, "web-health")).To(Equal(int64(1)))
	}, 8*time.Second, time.Second).Should(Succeed())
}

// TestExecOutsideDirectoryRefused: a command outside the directory never
// runs and is reported as ExecNotAllowed.
func TestExecOutsideDirectoryRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "exec-refused")
	marker := filepath.Join(t.TempDir(), "ran")
	g.Expect(k8s.Create(ctx, nginxDeployment(ns, "web", 1))).To(Succeed())
	g.Expect(k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			Policies: []autorebootv1alpha1.Policy{{
				Name: "escape",
				Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"../../../../../../bin/touch", marker}}},
					PeriodSeconds: 1,
				}},
			}},
		},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		rbp := getRBP(g, ns, "evil")
		var reason string
		for _, c := range rbp.Status.Conditions {
			if c.Type == autorebootv1alpha1.ConditionDegraded && c.Status == metav1.ConditionTrue {
				reason = c.Reason
			}
		}
		g.Expect(reason).To(Equal(autorebootv1alpha1.ReasonExecNotAllowed))
	}, timeout, interval).Should(Succeed())
	_, err := os.Stat(marker)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the refused command ran")
}

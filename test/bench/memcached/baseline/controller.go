package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	finalizer = "tutorial.bench.runbook.dev/finalizer"

	condAvailable   = "Available"
	condProgressing = "Progressing"
	condDegraded    = "Degraded"
)

// reconciler follows the tutorial's sequence: first status, finalizer,
// Deployment created or resized, final status written every time.
type reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &Memcached{}
	if err := r.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(mc.Status.Conditions) == 0 {
		setCondition(mc, condAvailable, metav1.ConditionUnknown, "Reconciling", "Starting reconciliation")
		if err := r.Status().Update(ctx, mc); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Get(ctx, req.NamespacedName, mc); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !mc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, mc)
	}
	if controllerutil.AddFinalizer(mc, finalizer) {
		if err := r.Update(ctx, mc); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.reconcileDeployment(ctx, mc)
}

// reconcileDeployment creates the Deployment or corrects its replicas,
// then records Available.
func (r *reconciler) reconcileDeployment(ctx context.Context, mc *Memcached) (ctrl.Result, error) {
	dep := &appsv1.Deployment{}
	err := r.Get(ctx, client.ObjectKeyFromObject(mc), dep)
	switch {
	case apierrors.IsNotFound(err):
		want, err := r.deploymentFor(mc)
		if err == nil {
			err = r.Create(ctx, want)
		}
		if err != nil {
			return ctrl.Result{}, r.fail(ctx, mc, err)
		}
		setCondition(mc, condProgressing, metav1.ConditionTrue, "Creating", "Deployment created")
		if err := r.Status().Update(ctx, mc); err != nil {
			return ctrl.Result{}, err
		}
		// The tutorial looks again a minute later.
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != mc.Spec.Size {
		dep.Spec.Replicas = ptr.To(mc.Spec.Size)
		if err := r.Update(ctx, dep); err != nil {
			return ctrl.Result{}, r.fail(ctx, mc, err)
		}
		setCondition(mc, condProgressing, metav1.ConditionTrue, "Resizing", fmt.Sprintf("Deployment resized to %d", mc.Spec.Size))
		if err := r.Status().Update(ctx, mc); err != nil {
			return ctrl.Result{}, err
		}
		// The tutorial reconciles again; the update's own watch event
		// does that.
		return ctrl.Result{}, nil
	}
	setCondition(mc, condProgressing, metav1.ConditionFalse, "Reconciled", "Deployment matches the spec")
	setCondition(mc, condAvailable, metav1.ConditionTrue, "Reconciling",
		fmt.Sprintf("Deployment for %s with %d replicas created successfully", mc.Name, mc.Spec.Size))
	return ctrl.Result{}, r.Status().Update(ctx, mc)
}

// fail records a failed Deployment write as Available=False.
func (r *reconciler) fail(ctx context.Context, mc *Memcached, cause error) error {
	setCondition(mc, condAvailable, metav1.ConditionFalse, "Reconciling", cause.Error())
	if err := r.Status().Update(ctx, mc); err != nil {
		return err
	}
	return cause
}

// finalize runs the clean-up the finalizer stands for (an event here) and
// lets the object go.
func (r *reconciler) finalize(ctx context.Context, mc *Memcached) error {
	if !controllerutil.ContainsFinalizer(mc, finalizer) {
		return nil
	}
	setCondition(mc, condDegraded, metav1.ConditionUnknown, "Finalizing", "Running the finalizer")
	if err := r.Status().Update(ctx, mc); err != nil {
		return err
	}
	r.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, "Deleting", "Delete", "Memcached %s is being deleted", mc.Name)
	if err := r.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
		return err
	}
	setCondition(mc, condDegraded, metav1.ConditionTrue, "Finalizing", "Finalizer done")
	if err := r.Status().Update(ctx, mc); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(mc, finalizer)
	return r.Update(ctx, mc)
}

// deploymentFor is the Deployment of mc, owned by it.
func (r *reconciler) deploymentFor(mc *Memcached) (*appsv1.Deployment, error) {
	labels := map[string]string{"app.kubernetes.io/name": "baseline-memcached", "app.kubernetes.io/instance": mc.Name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: mc.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(mc.Spec.Size),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
					Containers: []corev1.Container{{
						Name:            "memcached",
						Image:           "memcached:1.6.26-alpine3.19",
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"memcached", "--memory-limit=64", "-o", "modern", "-v"},
						Ports:           []corev1.ContainerPort{{Name: "memcached", ContainerPort: 11211}},
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                ptr.To[int64](1001),
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	if err := ctrl.SetControllerReference(mc, dep, r.Scheme); err != nil {
		return nil, err
	}
	return dep, nil
}

func setCondition(mc *Memcached, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: mc.Generation,
	})
}

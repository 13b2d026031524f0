package reloadercompat

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// clusterMetadata reads ConfigMaps from the compat mode's own metadata
// cache (trimmed to names and Reloader's two annotations) and Secrets with
// a metadata GET of the one object: the manager keeps no list of Secrets
// and never reads their data here.
type clusterMetadata struct {
	configMaps client.Reader
	secrets    client.Reader
}

func configMapMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

func (c clusterMetadata) meta(ctx context.Context, kind autorebootv1alpha1.WatchKind, namespace, name string) (objectMeta, error) {
	m := &metav1.PartialObjectMetadata{}
	reader := c.configMaps
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind)))
	if kind == autorebootv1alpha1.WatchSecret {
		reader = c.secrets
	}
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, m)
	if apierrors.IsNotFound(err) {
		return objectMeta{}, nil
	}
	if err != nil {
		return objectMeta{}, fmt.Errorf("reading %s %s/%s metadata: %w", kind, namespace, name, err)
	}
	a := m.GetAnnotations()
	return objectMeta{exists: true, ignore: a[AnnotationIgnore] == "true", match: a[AnnotationMatch] == "true"}, nil
}

func (c clusterMetadata) configMapNames(ctx context.Context, namespace string) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.configMaps.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing ConfigMaps of %s: %w", namespace, err)
	}
	out := make([]string, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].Name)
	}
	return out, nil
}

// trimConfigMap keeps what the resolution reads: identity and Reloader's
// two annotations. Other annotations can hold the data itself (kubectl's
// last-applied-configuration).
func trimConfigMap(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	kept := map[string]string{}
	for _, k := range []string{AnnotationIgnore, AnnotationMatch} {
		if v, ok := m.Annotations[k]; ok {
			kept[k] = v
		}
	}
	m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Annotations: kept}
	return m, nil
}

// newConfigMapCache builds the metadata cache of ConfigMaps (namespaces
// as the manager's --watch-namespaces; all when empty).
func newConfigMapCache(opts cache.Options, namespaces []string) cache.Options {
	opts.DefaultTransform = trimConfigMap
	opts.ReaderFailOnMissingInformer = true
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

package main

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// describeGetError turns an API error into a sentence a user can act on.
func describeGetError(err error, kind, ns, name string) error {
	where := name
	if ns != "" {
		where = ns + "/" + name
	}
	switch {
	case apierrors.IsNotFound(err):
		if ns != "" {
			return fmt.Errorf("%s %s not found (namespace %s; -n chooses another)", kind, name, ns)
		}
		return fmt.Errorf("%s %s not found", kind, name)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading %s %s is forbidden for you: %w", kind, where, err)
	}
	return fmt.Errorf("reading %s %s: %w", kind, where, err)
}

func describeWriteError(err error, kind, ns, name string) error {
	where := name
	if ns != "" {
		where = ns + "/" + name
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patching %s %s is forbidden for you (the plugin needs patch on it): %w", kind, where, err)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("the apiserver refuses the change to %s %s: %w", kind, where, err)
	}
	return fmt.Errorf("patching %s %s: %w", kind, where, err)
}

func describeListError(err error, kinds string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("listing %s is forbidden for you: %w", kinds, err)
	}
	return fmt.Errorf("listing %s: %w", kinds, err)
}

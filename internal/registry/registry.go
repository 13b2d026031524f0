// Package registry holds the controllers the manager binary can run and
// selects the ones named by the --controllers flag.
package registry

import (
	"fmt"
	"sort"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
)

// SetupFunc wires one controller into the manager. It runs only when the
// controller was selected, so a disabled controller costs no watch or cache.
type SetupFunc func(mgr ctrl.Manager) error

// Entry is a controller the binary knows how to run.
type Entry struct {
	Name  string
	Setup SetupFunc
}

// Registry is the ordered set of controllers built into the binary.
// It is built in main; there is no package-level instance.
type Registry struct {
	entries []Entry
}

// Add registers a controller. Names are unique and lower-case, as users type
// them in --controllers.
func (r *Registry) Add(name string, setup SetupFunc) {
	for _, e := range r.entries {
		if e.Name == name {
			panic(fmt.Sprintf("registry: controller %q registered twice", name))
		}
	}
	r.entries = append(r.entries, Entry{Name: name, Setup: setup})
}

// Names lists the registered controllers in registration order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.entries))
	for _, e := range r.entries {
		names = append(names, e.Name)
	}
	return names
}

// Select parses a comma-separated list of controller names. An empty list or
// "all" selects every controller. Unknown names are an error that lists the
// known ones, so a typo fails at start-up instead of silently running nothing.
func (r *Registry) Select(list string) ([]Entry, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return append([]Entry(nil), r.entries...), nil
	}
	wanted := map[string]bool{}
	var unknown []string
	for _, raw := range strings.Split(list, ",") {
		name := strings.ToLower(strings.TrimSpace(raw))
		if name == "" {
			continue
		}
		if !r.has(name) {
			unknown = append(unknown, name)
			continue
		}
		wanted[name] = true
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown controller(s) %s in --controllers; known: %s",
			strings.Join(unknown, ", "), strings.Join(r.Names(), ", "))
	}
	if len(wanted) == 0 {
		return nil, fmt.Errorf("--controllers=%q selects no controller; known: %s", list, strings.Join(r.Names(), ", "))
	}
	var out []Entry
	for _, e := range r.entries {
		if wanted[e.Name] {
			out = append(out, e)
		}
	}
	return out, nil
}

func (r *Registry) has(name string) bool {
	for _, e := range r.entries {
		if e.Name == name {
			return true
		}
	}
	return false
}

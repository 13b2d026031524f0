package probe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// Bounds of a change description: it goes into events (1 KiB notes),
// status and webhook messages, and a ConfigMap may have thousands of keys.
const (
	maxListedKeys    = 10
	MaxListedObjects = 5
	maxShownName     = 64
)

// objectChange is what changed in one ConfigMap or Secret: names only,
// never a value.
type objectChange struct {
	kind             autorebootv1alpha1.WatchKind
	name             string
	created, deleted bool
	keys             fingerprint.KeyDiff
}

func (c objectChange) String() string {
	obj := string(c.kind) + " " + shownName(c.name)
	switch {
	case c.created:
		return obj + " created"
	case c.deleted:
		return obj + " deleted"
	case c.keys.Unknown:
		return fmt.Sprintf("%s changed (more than %d keys: which changed is not tracked)", obj, fingerprint.MaxDigestedKeys)
	}
	budget := maxListedKeys
	var parts []string
	for _, p := range []struct {
		verb  string
		names []string
	}{{"changed", c.keys.Changed}, {"added", c.keys.Added}, {"removed", c.keys.Removed}} {
		if len(p.names) > 0 {
			parts = append(parts, listKeys(p.names, &budget)+" "+p.verb)
		}
	}
	if len(parts) == 0 {
		return obj + " changed"
	}
	noun := "keys"
	if len(c.keys.Changed)+len(c.keys.Added)+len(c.keys.Removed) == 1 {
		noun = "key"
	}
	return obj + ": " + noun + " " + strings.Join(parts, ", ")
}

// listKeys lists names while the budget lasts and counts the rest.
func listKeys(names []string, budget *int) string {
	n := min(len(names), *budget)
	*budget -= n
	shown := make([]string, 0, n)
	for _, name := range names[:n] {
		shown = append(shown, shownName(name))
	}
	rest := len(names) - n
	switch {
	case n == 0:
		return strconv.Itoa(rest) + " more"
	case rest > 0:
		return strings.Join(shown, ", ") + " and " + strconv.Itoa(rest) + " more"
	}
	return strings.Join(shown, ", ")
}

// describeChanges joins the objects' changes, the first few of them.
func describeChanges(cs []objectChange) string {
	n := min(len(cs), MaxListedObjects)
	parts := make([]string, 0, n+1)
	for _, c := range cs[:n] {
		parts = append(parts, c.String())
	}
	if rest := len(cs) - n; rest > 0 {
		parts = append(parts, fmt.Sprintf("and %d more objects changed", rest))
	}
	return strings.Join(parts, "; ")
}

// shownName is a tenant-chosen name (an object's, a key's) as it may
// appear in an event, a log line, status or a webhook message: as is when
// it has only the characters Kubernetes allows in keys, else quoted with
// every control and non-ASCII character escaped, so that no name can end a
// line, forge a field or pass for a list of names. Long names are cut.
func shownName(s string) string {
	cut := false
	if len(s) > maxShownName {
		n := maxShownName
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s, cut = s[:n], true
	}
	if !cut && s != "" && plainName(s) {
		return s
	}
	q := strconv.QuoteToASCII(s)
	if cut {
		q += "..."
	}
	return q
}

func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// ChangeNote is an observation's account of what changed since the
// observation whose fingerprint is base. The trigger uses text only when
// base is the baseline it compares against (the prober's previous data
// may predate the baseline, e.g. after the manager started).
type ChangeNote struct {
	Base string
	Text string
	// what names what is observed, for a change whose keys are unknown.
	What string
}

// Since describes the change from baseline; "" when the prober gave no
// account (sql triggers).
func (c ChangeNote) Since(baseline string) string {
	switch {
	case c.Text != "" && c.Base == baseline:
		return c.Text
	case c.What == "":
		return ""
	}
	return c.What + " changed (which keys is unknown: the manager had not seen the previous data)"
}

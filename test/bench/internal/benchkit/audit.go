package benchkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditPolicy is an audit policy that logs, at level Metadata (who, verb,
// object, response code, times; no bodies), each request of the given
// users once, when its response is complete, and nothing else: the log
// then holds exactly the requests of those users, at little cost to the
// apiserver.
func AuditPolicy(users ...string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = fmt.Sprintf("%q", u)
	}
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: [%s]
- level: None
`, strings.Join(quoted, ", "))
}

// AuditEvent is the part of an audit.k8s.io/v1 Event the benchmarks read.
type AuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived metav1.MicroTime `json:"requestReceivedTimestamp"`
	// Completed is when the answer was complete (the ResponseComplete
	// stage's timestamp).
	Completed metav1.MicroTime `json:"stageTimestamp"`
}

// IsWrite reports whether the request asked to change something (whatever
// its answer: a refused write still cost the apiserver a request).
func (e *AuditEvent) IsWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Resource is resource[/subresource] ("memcacheds/status"), or the path
// for a non-resource request.
func (e *AuditEvent) Resource() string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		p, _, _ := strings.Cut(e.RequestURI, "?")
		return p
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// Key is "verb resource[/subresource]", e.g. "patch deployments".
func (e *AuditEvent) Key() string { return e.Verb + " " + e.Resource() }

// Code is the HTTP status of the answer (0 when unknown).
func (e *AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// Name is the object's name ("" when the request named none).
func (e *AuditEvent) Name() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Name
}

// Namespace is the object's namespace.
func (e *AuditEvent) Namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

// ReadAudit reads the complete requests of user from the audit log at
// path, in the order the apiserver received them. The log is read whole:
// under AuditPolicy it holds only the users' requests.
func ReadAudit(path, user string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written right now
		}
		if e.User.Username != user || (e.Stage != "ResponseComplete" && e.Stage != "Panic") {
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RequestReceived.Before(&out[j].RequestReceived) })
	return out, nil
}

// Between returns the events whose request the apiserver received in
// [from, to).
func Between(evs []AuditEvent, from, to time.Time) []AuditEvent {
	var out []AuditEvent
	for _, e := range evs {
		t := e.RequestReceived.Time
		if !t.Before(from) && t.Before(to) {
			out = append(out, e)
		}
	}
	return out
}

// Writes returns the write requests among evs.
func Writes(evs []AuditEvent) []AuditEvent {
	var out []AuditEvent
	for _, e := range evs {
		if e.IsWrite() {
			out = append(out, e)
		}
	}
	return out
}

// CountBy counts evs by key.
func CountBy(evs []AuditEvent, key func(*AuditEvent) string) map[string]int {
	m := map[string]int{}
	for i := range evs {
		m[key(&evs[i])]++
	}
	return m
}

// Failed counts the requests among evs that were not answered 2xx, by
// "verb resource code".
func Failed(evs []AuditEvent) map[string]int {
	m := map[string]int{}
	for i := range evs {
		if c := evs[i].Code(); c < 200 || c > 299 {
			m[fmt.Sprintf("%s %d", evs[i].Key(), c)]++
		}
	}
	return m
}

// Describe renders counts as "k1=v1, k2=v2", largest first (then by key);
// "none" when empty.
func Describe(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// Total is the sum of the counts.
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

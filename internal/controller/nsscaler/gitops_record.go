package nsscaler

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationGitOpsPaused is the annotation an NSScaler puts on a GitOps
// object it pauses, in the same write as the pause: what the paused field
// held before, and which NSScaler paused it. Without it the object is never
// resumed by an NSScaler; with it the object is never paused over again
// (the recorded value stays the one from before the first pause).
const AnnotationGitOpsPaused = "scaling.runbook.dev/gitops-paused"

// maxGitOpsRecordLength bounds the record the controller reads back (an
// Argo CD automated sync policy is a few small fields).
const maxGitOpsRecordLength = 4096

// gitOpsRecord is the value of AnnotationGitOpsPaused, e.g.
// {"v":1,"by":"nightly","previous":false} for a Flux object whose
// spec.suspend was false, {"v":1,"by":"nightly","previous":{"selfHeal":true}}
// for an Application's spec.syncPolicy.automated. Previous is JSON null
// when the field was absent.
type gitOpsRecord struct {
	Version  int             `json:"v"`
	By       string          `json:"by"`
	Previous json.RawMessage `json:"previous"`
}

// recordOf reads an object's record; ok is false when it has none.
func recordOf(u *unstructured.Unstructured) (rec gitOpsRecord, ok bool, err error) {
	raw, ok := u.GetAnnotations()[AnnotationGitOpsPaused]
	if !ok {
		return rec, false, nil
	}
	if len(raw) > maxGitOpsRecordLength {
		return rec, true, fmt.Errorf("annotation %s is longer than %d bytes", AnnotationGitOpsPaused, maxGitOpsRecordLength)
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, true, fmt.Errorf("annotation %s: %w", AnnotationGitOpsPaused, err)
	}
	if rec.Version != annotationVersion {
		return rec, true, fmt.Errorf("annotation %s: %w %d", AnnotationGitOpsPaused, ErrUnknownAnnotationVersion, rec.Version)
	}
	if len(rec.Previous) == 0 {
		rec.Previous = json.RawMessage("null")
	}
	return rec, true, nil
}

// newRecord records the field k pauses as u holds it now.
func newRecord(k *gitOpsKind, u *unstructured.Unstructured, by string) (string, error) {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, k.field...)
	if err != nil {
		return "", err
	}
	if !found {
		v = nil
	}
	prev, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(gitOpsRecord{Version: annotationVersion, By: by, Previous: prev})
	return string(out), err
}

// fieldPatch is a JSON merge patch that sets path to value (JSON null
// removes it), guarded by resourceVersion, with the record annotation set
// (record != nil) or removed.
func fieldPatch(path []string, value json.RawMessage, resourceVersion string, record *string) ([]byte, error) {
	var leaf any = value
	for i := len(path) - 1; i >= 0; i-- {
		leaf = map[string]any{path[i]: leaf}
	}
	patch := leaf.(map[string]any)
	var ann any
	if record != nil {
		ann = *record
	}
	patch["metadata"] = map[string]any{
		"resourceVersion": resourceVersion,
		"annotations":     map[string]any{AnnotationGitOpsPaused: ann},
	}
	return json.Marshal(patch)
}

package nsscaler

import (
	"encoding/json"
	"errors"
	"fmt"
)

// AnnotationOriginal is the annotation that carries a parked workload's
// original state. It is written in the same request that parks the workload
// (or, for custom resources parked through the scale subresource, in the
// request before), so the original survives any crash of the operator.
const AnnotationOriginal = "scaling.runbook.dev/original"

// annotationVersion is the current version of the annotation's format.
const annotationVersion = 1

// ErrUnknownAnnotationVersion is returned for an annotation written by a newer
// operator: it is left untouched rather than misread.
var ErrUnknownAnnotationVersion = errors.New("unknown annotation version")

// Original is the state a workload had before it was parked: its replica
// count or, for a CronJob, its suspend flag. By names the NSScaler that
// parked it.
//
// Encoded as JSON, e.g. {"v":1,"replicas":3,"by":"release"} or
// {"v":1,"suspend":false,"by":"release"}.
type Original struct {
	Version  int    `json:"v"`
	Replicas *int32 `json:"replicas,omitempty"`
	Suspend  *bool  `json:"suspend,omitempty"`
	By       string `json:"by"`
}

// ReplicasOriginal records a replica count.
func ReplicasOriginal(replicas int32, by string) Original {
	return Original{Version: annotationVersion, Replicas: &replicas, By: by}
}

// SuspendOriginal records a CronJob's suspend flag.
func SuspendOriginal(suspend bool, by string) Original {
	return Original{Version: annotationVersion, Suspend: &suspend, By: by}
}

// Encode renders the annotation value.
func (o Original) Encode() string {
	b, err := json.Marshal(o)
	if err != nil {
		// A struct of ints, bools and strings always marshals.
		panic(fmt.Sprintf("encoding original: %v", err))
	}
	return string(b)
}

// DecodeOriginal parses an annotation value. It rejects values of another
// format version and values that record neither replicas nor suspend, or
// that record a negative replica count.
func DecodeOriginal(s string) (Original, error) {
	var o Original
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return Original{}, fmt.Errorf("annotation %s: %w", AnnotationOriginal, err)
	}
	if o.Version != annotationVersion {
		return Original{}, fmt.Errorf("annotation %s: version %d: %w", AnnotationOriginal, o.Version, ErrUnknownAnnotationVersion)
	}
	switch {
	case o.Replicas == nil && o.Suspend == nil:
		return Original{}, fmt.Errorf("annotation %s records neither replicas nor suspend", AnnotationOriginal)
	case o.Replicas != nil && o.Suspend != nil:
		return Original{}, fmt.Errorf("annotation %s records both replicas and suspend", AnnotationOriginal)
	case o.Replicas != nil && *o.Replicas < 0:
		return Original{}, fmt.Errorf("annotation %s records negative replicas %d", AnnotationOriginal, *o.Replicas)
	}
	return o, nil
}

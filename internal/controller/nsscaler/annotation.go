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
//
// A KEDA ScaledObject records the value its paused-replicas annotation had
// (absent: {"v":1,"pause":{},"by":"release"}).
type Original struct {
	Version  int          `json:"v"`
	Replicas *int32       `json:"replicas,omitempty"`
	Suspend  *bool        `json:"suspend,omitempty"`
	Pause    *PausedState `json:"pause,omitempty"`
	By       string       `json:"by"`
}

// PausedState is a ScaledObject's KEDA paused-replicas annotation before it
// was parked; Replicas is nil when it had none.
type PausedState struct {
	Replicas *string `json:"replicas,omitempty"`
}

// maxOriginalLength bounds the annotation value the controller reads: the
// annotation is writable by whoever may edit the workload, and a valid one
// is far shorter.
const maxOriginalLength = 512

// ReplicasOriginal records a replica count.
func ReplicasOriginal(replicas int32, by string) Original {
	return Original{Version: annotationVersion, Replicas: &replicas, By: by}
}

// SuspendOriginal records a CronJob's suspend flag.
func SuspendOriginal(suspend bool, by string) Original {
	return Original{Version: annotationVersion, Suspend: &suspend, By: by}
}

// PauseOriginal records a ScaledObject's paused-replicas annotation (nil:
// absent).
func PauseOriginal(pausedReplicas *string, by string) Original {
	var prior *string
	if pausedReplicas != nil {
		v := *pausedReplicas
		prior = &v
	}
	return Original{Version: annotationVersion, Pause: &PausedState{Replicas: prior}, By: by}
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
// format version, values that record none or several of replicas, suspend
// and pause, a negative replica count, and values longer than 512 bytes.
func DecodeOriginal(s string) (Original, error) {
	if len(s) > maxOriginalLength {
		return Original{}, fmt.Errorf("annotation %s is longer than %d bytes", AnnotationOriginal, maxOriginalLength)
	}
	var o Original
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		// A fixed phrase: whoever may edit the workload wrote the value,
		// and a condition message must not carry it.
		return Original{}, fmt.Errorf("annotation %s is not a JSON object of this operator", AnnotationOriginal)
	}
	if o.Version != annotationVersion {
		return Original{}, fmt.Errorf("annotation %s: version %d: %w", AnnotationOriginal, o.Version, ErrUnknownAnnotationVersion)
	}
	recorded := 0
	for _, set := range []bool{o.Replicas != nil, o.Suspend != nil, o.Pause != nil} {
		if set {
			recorded++
		}
	}
	switch {
	case recorded == 0:
		return Original{}, fmt.Errorf("annotation %s records neither replicas, suspend nor pause", AnnotationOriginal)
	case recorded > 1:
		return Original{}, fmt.Errorf("annotation %s records more than one of replicas, suspend and pause", AnnotationOriginal)
	case o.Replicas != nil && *o.Replicas < 0:
		return Original{}, fmt.Errorf("annotation %s records negative replicas %d", AnnotationOriginal, *o.Replicas)
	}
	return o, nil
}

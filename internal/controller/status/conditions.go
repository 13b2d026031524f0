package status

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions sets the conditions of one status computation: every
// condition gets the object's generation, and a changed one the time of
// the computation (the controller's injected clock, so tests can pin it).
type Conditions struct {
	list       *[]metav1.Condition
	generation int64
	now        metav1.Time
}

// NewConditions works on list, which belongs to an object of generation.
func NewConditions(list *[]metav1.Condition, generation int64, now time.Time) Conditions {
	return Conditions{list: list, generation: generation, now: metav1.NewTime(now)}
}

// Set sets one condition; its transition time changes only when its
// status does. It reports whether anything changed.
func (c Conditions) Set(typ string, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(c.list, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: c.generation, LastTransitionTime: c.now,
	})
}

// True sets typ to True.
func (c Conditions) True(typ, reason, message string) bool {
	return c.Set(typ, metav1.ConditionTrue, reason, message)
}

// False sets typ to False.
func (c Conditions) False(typ, reason, message string) bool {
	return c.Set(typ, metav1.ConditionFalse, reason, message)
}

// Changed reports whether condition typ differs in status or reason
// between before and after: the transitions worth an event.
func Changed(before, after []metav1.Condition, typ string) bool {
	b, a := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(after, typ)
	switch {
	case a == nil:
		return false
	case b == nil:
		return true
	}
	return b.Status != a.Status || b.Reason != a.Reason
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SelectorOperator is the operator of a TargetSelector requirement.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type SelectorOperator string

// Selector operators.
const (
	SelectorOpIn           SelectorOperator = "In"
	SelectorOpNotIn        SelectorOperator = "NotIn"
	SelectorOpExists       SelectorOperator = "Exists"
	SelectorOpDoesNotExist SelectorOperator = "DoesNotExist"
)

// SelectorRequirement is one matchExpressions entry of a TargetSelector.
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",message="target.selector.matchExpressions: In and NotIn need at least one value, Exists and DoesNotExist take none"
type SelectorRequirement struct {
	// Key is the label key (an optional DNS-subdomain prefix and a name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	Operator SelectorOperator `json:"operator"`
	// Values for In and NotIn; empty for Exists and DoesNotExist.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Values []string `json:"values,omitempty"`
}

// LabelValue is a label value: at most 63 characters, letters, digits,
// '-', '_' and '.', starting and ending with a letter or digit, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// TargetSelector has the shape of a Kubernetes label selector, with the
// checks the apiserver makes for built-in kinds but not for a custom
// resource: known operators, values only where they belong, valid label
// keys and values, and no empty selector (which would select every
// workload of the kind in the namespace).
// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="target.selector must have matchLabels or matchExpressions: an empty selector would select every workload of the kind"
type TargetSelector struct {
	// MatchLabels: every key must have exactly this value.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="target.selector.matchLabels: keys must be valid label keys"
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions: every requirement must hold.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	MatchExpressions []SelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelector converts s to the Kubernetes type the client libraries take.
func (s *TargetSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if len(s.MatchLabels) > 0 {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: append([]string(nil), r.Values...),
		})
	}
	return out
}

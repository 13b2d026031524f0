package probe

import "strings"

// MaxChangeText bounds status.policies[].lastChange and
// status.policies[].targets[].lastChange.
const MaxChangeText = 512

// MergeChange adds a change to the description of the changes a pending
// restart is for.
func MergeChange(old, cur string) string {
	switch {
	case old == "":
		return Truncate(cur, MaxChangeText)
	case cur == "", strings.Contains(old, cur):
		return old
	case strings.Contains(cur, old):
		// cur already merged old (the worker merges fires that wait).
		return Truncate(cur, MaxChangeText)
	}
	return Truncate(old+"; "+cur, MaxChangeText)
}

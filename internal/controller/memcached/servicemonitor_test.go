package memcached

import "testing"

func TestIsSubset(t *testing.T) {
	tests := []struct {
		name       string
		want, have any
		ok         bool
	}{
		{"equal scalars", "a", "a", true},
		{"different scalars", int64(1), int64(2), false},
		{"extra keys in have", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true},
		{"missing key", map[string]any{"a": "1", "c": "3"}, map[string]any{"a": "1"}, false},
		{"nested", map[string]any{"s": map[string]any{"l": []any{map[string]any{"p": "m"}}}},
			map[string]any{"s": map[string]any{"l": []any{map[string]any{"p": "m", "scheme": "http"}}}}, true},
		{"list length differs", []any{"a"}, []any{"a", "b"}, false},
		{"type differs", map[string]any{}, []any{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isSubset(tt.want, tt.have); got != tt.ok {
				t.Errorf("isSubset = %v, want %v", got, tt.ok)
			}
		})
	}
}

package status

import "testing"

func TestPositiveOr(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{n: 3, want: 3}, {n: 1, want: 1}, {n: 0, want: 32}, {n: -1, want: 32}} {
		if got := PositiveOr(tc.n, 32); got != tc.want {
			t.Errorf("PositiveOr(%d, 32) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

package benchkit

import "testing"

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{name: "none", want: 0},
		{name: "one", xs: []float64{1.2}, want: 1.2},
		{name: "odd count, unsorted", xs: []float64{1.19, 0.94, 1.05}, want: 1.05},
		{name: "even count: mean of the middle two", xs: []float64{4, 1, 3, 2}, want: 2.5},
		{name: "an outlier does not move it", xs: []float64{1, 1, 100}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.xs...)
			if got := Median(tt.xs); got != tt.want {
				t.Fatalf("Median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.xs[i] {
					t.Fatalf("Median reordered its input: %v", tt.xs)
				}
			}
		})
	}
}

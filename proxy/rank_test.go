package proxy

import (
	"fmt"
	"math"
	"testing"
)

func TestSpearman(t *testing.T) {
	for _, c := range []struct {
		x, y []float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{[]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1},
		// Monotone but not linear: ranks agree.
		{[]float64{1, 2, 3, 4, 5}, []float64{1, 8, 27, 64, 125}, 1},
		// Hand-worked: ranks x 1..5, y (2, 1, 4, 3, 5): Σd² = 4, ρ = 1 − 6·4/(5·24) = 0.8.
		{[]float64{1, 2, 3, 4, 5}, []float64{20, 10, 40, 30, 50}, 0.8},
		// Ties: x ranks (1.5, 1.5, 3), y ranks (1, 2, 3): Pearson of ranks = √3/2.
		{[]float64{7, 7, 9}, []float64{1, 2, 3}, math.Sqrt(3) / 2},
	} {
		got, err := Spearman(c.x, c.y)
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Spearman(%v, %v) = %v, %v; want %v", c.x, c.y, got, err, c.want)
		}
	}
	if r, _ := Spearman([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(r) {
		t.Errorf("constant x: %v, want NaN", r)
	}
	if _, err := Spearman([]float64{1}, []float64{1}); err == nil {
		t.Error("one pair accepted")
	}
	if _, err := Spearman([]float64{1, 2}, []float64{1}); err == nil {
		t.Error("unequal lengths accepted")
	}
}

func TestKendall(t *testing.T) {
	for _, c := range []struct {
		x, y []float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{[]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1},
		// Hand-worked: y (2, 1, 4, 3, 5) against 1..5: 2 discordant pairs of
		// 10, τ = (8 − 2)/10.
		{[]float64{1, 2, 3, 4, 5}, []float64{20, 10, 40, 30, 50}, 0.6},
		// SciPy's kendalltau documentation example (with ties, τ-b):
		// kendalltau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0]) = -0.47140452079103173.
		{[]float64{12, 2, 1, 12, 2}, []float64{1, 4, 7, 1, 0}, -0.47140452079103173},
	} {
		got, err := Kendall(c.x, c.y)
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Kendall(%v, %v) = %v, %v; want %v", c.x, c.y, got, err, c.want)
		}
	}
	if r, _ := Kendall([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(r) {
		t.Errorf("constant x: %v, want NaN", r)
	}
	if _, err := Kendall([]float64{1}, []float64{1}); err == nil {
		t.Error("one pair accepted")
	}
	if _, err := Kendall([]float64{1, 2}, []float64{1}); err == nil {
		t.Error("unequal lengths accepted")
	}
}

func ExampleSpearman() {
	klBefore := []float64{0.05, 0.30, 0.12, 0.80}
	lossAfter := []float64{3.95, 4.10, 4.02, 4.60}
	r, _ := Spearman(klBefore, lossAfter)
	fmt.Printf("%.2f\n", r)
	// Output: 1.00
}

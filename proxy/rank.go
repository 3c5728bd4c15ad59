package proxy

import (
	"fmt"
	"math"
	"sort"
)

// Spearman returns the Spearman rank correlation of x and y: the Pearson
// correlation of their ranks, tied values sharing the mean of their ranks.
// It is how a proxy is judged against the quality it stands for (e.g. KL
// before training against the loss after recovery). It needs at least two
// pairs and is NaN when either side is constant.
func Spearman(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("proxy: spearman of %d and %d values", len(x), len(y))
	}
	if len(x) < 2 {
		return 0, fmt.Errorf("proxy: spearman of %d pairs: want at least 2", len(x))
	}
	rx, ry := ranks(x), ranks(y)
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx /= float64(len(rx))
	my /= float64(len(ry))
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN(), nil
	}
	return sxy / math.Sqrt(sxx*syy), nil
}

// ranks returns the 1-based ranks of v, ties averaged.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mean
		}
		i = j + 1
	}
	return r
}

// Kendall returns Kendall's rank correlation τ-b of x and y: the
// concordant minus the discordant pairs over the geometric mean of the
// pairs untied in x and untied in y, which corrects for ties (as R's
// cor(method = "kendall") and SciPy's kendalltau do). It needs at least two
// pairs and is NaN when either side is constant.
func Kendall(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("proxy: kendall of %d and %d values", len(x), len(y))
	}
	if len(x) < 2 {
		return 0, fmt.Errorf("proxy: kendall of %d pairs: want at least 2", len(x))
	}
	var s, nx, ny float64 // s: concordant − discordant; nx, ny: pairs untied in x, in y
	for i := range x {
		for j := i + 1; j < len(x); j++ {
			dx, dy := sign(x[i]-x[j]), sign(y[i]-y[j])
			s += dx * dy
			nx += dx * dx
			ny += dy * dy
		}
	}
	if nx == 0 || ny == 0 {
		return math.NaN(), nil
	}
	return s / math.Sqrt(nx*ny), nil
}

func sign(v float64) float64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

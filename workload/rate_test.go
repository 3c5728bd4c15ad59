package workload

import (
	"math"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 0, true}, {"0", 0, true}, {" 2.5 ", 2.5, true}, {"inf", math.Inf(1), true}, {"INF", math.Inf(1), true},
		{"+Inf", math.Inf(1), true}, {"infinity", math.Inf(1), true}, {"1e3", 1000, true},
		{"-1", 0, false}, {"nan", 0, false}, {"fast", 0, false}, {"1e999", 0, false}, {"-inf", 0, false},
	} {
		got, err := ParseRate(tc.in)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

package search

import (
	"errors"
	"math"
	"testing"
)

func TestParseUnits(t *testing.T) {
	bytes := []struct {
		in   string
		want float64
	}{{"13.96GiB", 13.96 * (1 << 30)}, {"16GB", 16e9}, {"900 MiB", 900 << 20}, {"2TiB", 2 << 40}, {"512kib", 512 << 10}}
	for _, c := range bytes {
		got, err := ParseBytes("max-memory", c.in)
		if err != nil || math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	secs := []struct {
		in   string
		want float64
	}{{"11.5s", 11.5}, {"500ms", 0.5}, {"40ms", 0.04}, {"2min", 120}, {"250us", 250e-6}}
	for _, c := range secs {
		got, err := ParseSeconds("max-e2e", c.in)
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("ParseSeconds(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if tp, err := ParseThroughput("min-throughput", "2000tok/s"); err != nil || tp.TokensPerS != 2000 || tp.RequestsPerS != 0 {
		t.Errorf("2000tok/s: %+v %v", tp, err)
	}
	if tp, err := ParseThroughput("min-throughput", "120req/min"); err != nil || tp.RequestsPerS != 2 {
		t.Errorf("120req/min: %+v %v", tp, err)
	}
	counts := []struct {
		in   string
		want float64
	}{{"3B", 3e9}, {"500M", 500e6}, {"7.5K", 7500}, {"123456", 123456}, {"1.5e9", 1.5e9}}
	for _, c := range counts {
		got, err := ParseCount("max-params", c.in)
		if err != nil || math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("ParseCount(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "13.96", "13.96GiBs", "GiB", "-1GiB", "0GB", "NaNGB", "1e999GB", "12 parsecs"} {
		_, err := ParseBytes("max-memory", bad)
		var ue *UnitError
		if !errors.As(err, &ue) || ue.Name != "max-memory" {
			t.Errorf("ParseBytes(%q) = %v, want a UnitError naming the budget", bad, err)
		}
	}
	for _, bad := range []string{"11.5", "11.5h", "fast"} {
		if _, err := ParseSeconds("max-e2e", bad); err == nil {
			t.Errorf("ParseSeconds(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"2000", "2000tok", "5 cars/s"} {
		if _, err := ParseThroughput("min-throughput", bad); err == nil {
			t.Errorf("ParseThroughput(%q) accepted", bad)
		}
	}
	if _, err := ParseCount("max-params", "3Q"); err == nil {
		t.Error("3Q accepted")
	}
}

// FuzzParse: no input makes a parser panic or return a non-positive or
// non-finite value without an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"13.96GiB", "500ms", "2000tok/s", "3B", "1e-3s", "+5GB", ".5s", "5.e3MB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(v float64, err error) {
			if err == nil && (v <= 0 || math.IsInf(v, 0) || math.IsNaN(v)) {
				t.Errorf("%q → %v without an error", s, v)
			}
		}
		check(ParseBytes("x", s))
		check(ParseSeconds("x", s))
		check(ParseCount("x", s))
		tp, err := ParseThroughput("x", s)
		check(tp.TokensPerS+tp.RequestsPerS, err)
	})
}

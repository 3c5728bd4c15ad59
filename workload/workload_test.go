package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestPresetsValid(t *testing.T) {
	if len(Presets()) != 4 {
		t.Fatalf("presets: %v", Presets())
	}
	for _, n := range Presets() {
		w, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		rs := w.Sample(500)
		for _, r := range rs {
			if r.Input < 1 || r.Output < 1 || (w.ContextLimit > 0 && r.Input+r.Output > w.ContextLimit) {
				t.Fatalf("%s: bad request %+v", n, r)
			}
		}
	}
	if _, err := Preset("nope"); err == nil || !strings.Contains(err.Error(), "chat") {
		t.Errorf("unknown preset error should list names: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Workload
		err  string
	}{
		{"zero input", Workload{Input: FixedLength(0), Output: FixedLength(10), Concurrency: 1}, "input length"},
		{"negative output", Workload{Input: FixedLength(10), Output: FixedLength(-5), Concurrency: 1}, "output length"},
		{"no load", Workload{Input: FixedLength(10), Output: FixedLength(10)}, "concurrency"},
		{"both", Workload{Input: FixedLength(10), Output: FixedLength(10), Concurrency: 2, Rate: 3}, "not both"},
		{"neg rate", Workload{Input: FixedLength(10), Output: FixedLength(10), Rate: -1}, "rate"},
		{"ctx", Workload{Input: FixedLength(1000), Output: FixedLength(100), Concurrency: 1, ContextLimit: 1024}, "exceeds the context limit"},
		{"uniform", Workload{Input: Length{Dist: Uniform, Min: 10, Max: 5}, Output: FixedLength(1), Concurrency: 1}, "uniform range"},
		{"dist", Workload{Input: Length{Dist: "zipf", Mean: 3}, Output: FixedLength(1), Concurrency: 1}, "unknown distribution"},
		{"ok offline", Workload{Input: FixedLength(10), Output: FixedLength(10), Rate: math.Inf(1), NumRequests: 5}, ""},
	} {
		err := tc.w.Validate()
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestDistributionMoments checks the samplers against their analytic moments.
func TestDistributionMoments(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		l         Length
		mean, std float64
	}{
		{Length{Dist: Uniform, Min: 100, Max: 300}, 200, 200 / math.Sqrt(12)},
		{Length{Dist: Normal, Mean: 5000, Std: 500}, 5000, 500},
		{Length{Dist: LogNormal, Mean: 1000, Std: 700}, 1000, 700},
	} {
		const n = 200000
		s, s2 := 0.0, 0.0
		for range n {
			x := float64(tc.l.Sample(r))
			s += x
			s2 += x * x
		}
		m := s / n
		sd := math.Sqrt(s2/n - m*m)
		if math.Abs(m-tc.mean)/tc.mean > 0.01 || math.Abs(sd-tc.std)/tc.std > 0.03 {
			t.Errorf("%v: mean %.1f std %.1f, want %.1f %.1f", tc.l, m, sd, tc.mean, tc.std)
		}
	}
}

func TestPoissonArrivalsAndSeed(t *testing.T) {
	w := Workload{Input: FixedLength(100), Output: FixedLength(10), Rate: 4, Seed: 9}
	rs := w.Sample(20000)
	rate := float64(len(rs)) / rs[len(rs)-1].Arrival
	if math.Abs(rate-4)/4 > 0.03 {
		t.Errorf("measured rate %.3f, want 4", rate)
	}
	again := w.Sample(20000)
	if again[12345] != rs[12345] {
		t.Error("same seed gave different samples")
	}
	w.Seed = 10
	if w.Sample(10)[9] == rs[9] {
		t.Error("different seed gave identical sample")
	}
	if w.Mode() != Poisson {
		t.Error(w.Mode())
	}
}

func ExamplePreset() {
	w, _ := Preset("game-character")
	fmt.Println(w.String())
	// Output: game-character: input uniform[256,768], output uniform[16,64], concurrency 64
}

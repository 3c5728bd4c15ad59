package estimate

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// toyEngine is a serving engine that exists only in this test: one entry
// of the engine table, priced with its own coefficients.
const toyEngine Engine = "toy"

// toySpec is the toy engine's entry: a vLLM-like pool engine whose profiled
// activations are 3 GiB at 4096 batched tokens, whose non-torch memory and
// CUDA graphs are its own, and whose KV pages are 64 tokens.
var toySpec = EngineSpec{
	Name: toyEngine, Aliases: []string{"toy-server"}, Backends: []hardware.Backend{hardware.CUDA},
	Pool: true, ShardsTP: true, DefaultPrecision: "bf16", PrecisionAs: map[string]string{"f16": "fp16"},
	KVRefused: map[string]string{"q8_0": "KV type q8_0 is llama.cpp-only"}, KVValid: []string{"auto", "bf16", "fp8"},
	Defaults: Defaults{BigBytes: 70 << 30, MaxSeqs: 64, MaxSeqsBig: 128, BatchedTokens: 2048, BatchedTokensBig: 4096,
		MemFraction: []FractionTier{{0, 0.8}}},
	OutputReserve: 0.5,
	memory: memoryRule{kind: memProfiled, ActDense: 3 * GiB, ActMoE: 4 * GiB, ActTokens: 4096,
		NonTorchTP1: 0.5 * GiB, NonTorchNVLink: 1 * GiB, NonTorchPCIe: 0.5 * GiB, Graphs: 0.25 * GiB, Block: 64},
	Sched: PoolScheduler, step: stepFitted,
	Coeffs:  CoeffKey{Family: "toy"},
	Words:   Wording{Memory: "Memory per toy", Overhead: "toy runtime", Limit: "toy limit"},
	Hints:   Hints{Weights: "a smaller toy", Overhead: "fewer toy tokens", KV: "a shorter toy context"},
	Command: func(a ServeArgs) string { return "toy-serve DIR --ctx " + itoa(a.MaxModelLen) },
	Align:   Align{Hidden: 128, MLP: 128},
}

// addToy puts the toy engine in the table for the test's duration.
func addToy(t *testing.T) {
	t.Helper()
	s := toySpec
	engineTable[toyEngine] = &s
	t.Cleanup(func() { delete(engineTable, toyEngine) })
}

// TestToyEngineIsOneEntry adds a serving engine as one table entry plus its
// coefficients and prices it, memory and time, through the same entry
// points as every engine: nothing else names it.
func TestToyEngineIsOneEntry(t *testing.T) {
	addToy(t)
	h100 := gpu(t, "h100-sxm")
	if e, err := LookupEngine("Toy-Server"); err != nil || e != toyEngine {
		t.Fatalf("LookupEngine(Toy-Server) = %q, %v", e, err)
	}
	if err := CheckEngine(toyEngine, gpu(t, "cpu-local")); err == nil {
		t.Error("the toy engine runs on CUDA only, yet CheckEngine accepts a CPU")
	}
	if got := toyEngine.Family(h100); got != "toy" {
		t.Errorf("family %q, want toy", got)
	}

	// Memory: the toy's own rule constants, on the same model as vLLM.
	m := llama8B()
	rep, err := Memory(m, h100, toyEngine, Options{MaxModelLen: 8192})
	if err != nil {
		t.Fatal(err)
	}
	budget := 0.8 * float64(h100.UsableBytes())
	act := 3 * GiB * 4096.0 / 4096
	pool := budget - rep.WeightsBytes - act - 0.5*GiB - 0.25*GiB
	if rep.BudgetBytes != budget || rep.ActivationBytes != act || math.Abs(rep.KVPoolBytes-pool) > 1 {
		t.Errorf("toy plan: budget %.3f act %.3f pool %.3f GiB; want %.3f, %.3f, %.3f", rep.BudgetBytes/GiB, rep.ActivationBytes/GiB,
			rep.KVPoolBytes/GiB, budget/GiB, act/GiB, pool/GiB)
	}
	if want := math.Floor(pool/(128<<10)/64) * 64; rep.KVCapacityTokens != want {
		t.Errorf("capacity %g tokens, want %g (64-token pages)", rep.KVCapacityTokens, want)
	}
	if want := min(128, int(pool/(8192*(128<<10)))); rep.MaxConcurrency != want || rep.MaxSeqs != 128 {
		t.Errorf("max concurrency %d (limit %d), want %d (limit 128)", rep.MaxConcurrency, rep.MaxSeqs, want)
	}
	if rep.OverheadBytes != 0.5*GiB+0.25*GiB+cudaContext {
		t.Errorf("overhead %.3f GiB", rep.OverheadBytes/GiB)
	}

	// Time: with vLLM's coefficients under the toy's key, a workload the
	// pools of both hold prices the same step time as vLLM.
	cf := &CoeffFile{Families: map[string]Coeffs{}}
	vc, _ := DefaultCoeffs().Family("vllm")
	cf.Families["toy"] = vc
	w := workload.FixedClosed(512, 64, 4)
	toy, err := EstimateWith(m, h100, toyEngine, Options{}, &w, cf, false)
	if err != nil {
		t.Fatal(err)
	}
	vllm, err := EstimateWith(m, h100, VLLM, Options{MaxBatchedTokens: 4096}, &w, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if toy.Family != "toy" || toy.Engine != toyEngine {
		t.Errorf("priced as %s / %s", toy.Engine, toy.Family)
	}
	if !(toy.Analytic.TPOT > 0) || !(toy.Latency.TTFT > 0) || !(toy.Analytic.OutputTokS > 0) {
		t.Fatalf("toy latency not priced: %+v", toy.Analytic)
	}
	if d := math.Abs(toy.Analytic.TPOT/vllm.Analytic.TPOT - 1); d > 1e-9 {
		t.Errorf("toy TPOT %.4f ms vs vLLM's %.4f ms with the same coefficients", toy.Analytic.TPOT*1e3, vllm.Analytic.TPOT*1e3)
	}
	// Its hints are its own.
	_, err = Memory(llama70B(), h100, toyEngine, Options{})
	var fe *FitError
	if !errors.As(err, &fe) || fe.Hint != "a smaller toy" || fe.Engine != toyEngine {
		t.Errorf("70B on one H100 with the toy: %v", err)
	}
	if got := toySpec.Command(ServeArgs{MaxModelLen: 4096}); got != "toy-serve DIR --ctx 4096" {
		t.Errorf("command %q", got)
	}
}

// TestUnknownEngineIsAnError: an engine not in the table is refused by
// every entry point, never priced by another engine's rules.
func TestUnknownEngineIsAnError(t *testing.T) {
	h100 := gpu(t, "h100-sxm")
	bad := Engine("nope")
	w := workload.FixedClosed(128, 16, 1)
	var ue *UnsupportedError
	if _, err := Memory(llama8B(), h100, bad, Options{}); !errors.As(err, &ue) || ue.Flag != "engine" || !strings.Contains(err.Error(), `unknown engine "nope"`) {
		t.Errorf("Memory: %v", err)
	}
	if _, err := Compile(h100, bad, Options{}, &w, nil); !errors.As(err, &ue) {
		t.Errorf("Compile: %v", err)
	}
	if _, err := EstimateWith(llama8B(), h100, bad, Options{}, &w, DefaultCoeffs(), false); !errors.As(err, &ue) {
		t.Errorf("EstimateWith: %v", err)
	}
	if _, err := LookupSpec(bad); err == nil {
		t.Error("LookupSpec accepts an unknown engine")
	}
	if _, ok := bad.Spec(); ok || bad.Pool() || bad.Local() || bad.Family(h100) != "" {
		t.Error("an unknown engine has facts")
	}
	if tp, _ := FitTP(llama8B(), h100, bad, Options{}, &w); tp != 0 {
		t.Errorf("FitTP of an unknown engine: %d", tp)
	}
}

// TestEveryEngineResolves: every name and alias resolves to its entry,
// no spelling names two engines, and every entry's facts are usable: its
// precisions and KV types exist, it prices a small model on a device it
// runs on, and it builds a command.
func TestEveryEngineResolves(t *testing.T) {
	seen := map[string]Engine{}
	for _, n := range Engines() {
		e, err := LookupEngine(n)
		if err != nil {
			t.Fatal(err)
		}
		s, err := LookupSpec(e)
		if err != nil || s.Name != e || string(e) != n {
			t.Fatalf("%s: entry %v, %v", n, s, err)
		}
		for _, a := range append([]string{n}, s.Aliases...) {
			if a != strings.ToLower(a) {
				t.Errorf("%s: alias %q is not lower case (LookupEngine lowers its input)", n, a)
			}
			if o, dup := seen[a]; dup {
				t.Errorf("spelling %q names %s and %s", a, o, e)
			}
			seen[a] = e
			if got, err := LookupEngine(a); err != nil || got != e {
				t.Errorf("LookupEngine(%q) = %q, %v", a, got, err)
			}
		}
		if len(s.Backends) == 0 || s.Command == nil || s.Coeffs.Family == "" || s.Words.Overhead == "" || s.Words.Memory == "" ||
			s.Hints.Weights == "" || s.Hints.KV == "" || len(s.Hints.Unfit) == 0 || len(s.Hints.Memory) == 0 ||
			s.Align.Hidden <= 0 || s.Align.MLP <= 0 || !(s.OutputReserve > 0) {
			t.Errorf("%s: incomplete entry %+v", n, s)
		}
		if (s.DefaultPrecision == "") == (s.FixedPrecision == "") {
			t.Errorf("%s: wants exactly one of DefaultPrecision %q and FixedPrecision %q", n, s.DefaultPrecision, s.FixedPrecision)
		}
		if s.DefaultPrecision != "" {
			if p, err := LookupPrecision(s.DefaultPrecision); err != nil || p.GGUF != s.GGUF {
				t.Errorf("%s: default precision %q: %v (GGUF %v)", n, s.DefaultPrecision, err, s.GGUF)
			}
		}
		for _, k := range s.KVValid {
			if _, err := LookupKVType(k); err != nil {
				t.Errorf("%s: KV type %q: %v", n, k, err)
			}
		}
		hw := gpu(t, map[hardware.Backend]string{hardware.CUDA: "h100-sxm", hardware.Metal: "apple-m4-max", hardware.CPU: "cpu-local"}[s.Backends[0]])
		w := workload.FixedClosed(128, 16, 2)
		r, err := Estimate(llama("small", 4, 512, 8, 8, 1024, 32000), hw, e, Options{}, &w)
		if err != nil || !(r.Analytic.TPOT > 0) || r.Engine != e {
			t.Errorf("%s on %s: %v", n, hw.Name, err)
		}
	}
}

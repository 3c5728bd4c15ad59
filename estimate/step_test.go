package estimate

import (
	"math"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/workload"
)

// moeModel is a uniform MoE decoder (gpt-oss-120b-like widths).
func moeModel() *architecture.Model {
	m := llama("moe", 36, 2880, 64, 8, 0, 201088)
	for i := range m.Layers {
		m.Layers[i].Attention.HeadDim = 64
		m.Layers[i].MLP = nil
		m.Layers[i].MoE = &architecture.MoE{Experts: 128, TopK: 4, ExpertWidth: 2880, Gated: true, Activation: "silu"}
	}
	return m
}

// TestMixedStepPopulation checks the step mixture of the analytic path: for
// a dense model the step cost is linear in the batch, so a population where
// a share q of the steps carries all the prefill costs what the mean step
// does; for an MoE model the experts touched grow sub-linearly with tokens,
// so the mixture is cheaper than the mean step, and the decode-only share
// streams far fewer expert bytes.
func TestMixedStepPopulation(t *testing.T) {
	h := gpu(t, "b200")
	p, _ := LookupPrecision("nvfp4")
	co, _ := DefaultCoeffs().Family("trtllm")
	mean := Batch{Decode: 4, DecodeCtx: 4 * 8700, Prefill: 32, PrefillAtt: 32 * 4000, PrefillSeq: 0.004, PrefillDone: 0.004}
	const q = 0.004 // one step in 250 carries an 8,192-token chunk
	for _, tc := range []struct {
		name  string
		m     *architecture.Model
		dense bool
	}{{"dense 8B", llama8B(), true}, {"MoE 128×top-4", moeModel(), false}} {
		s := summarize(tc.m, "nvfp4", "fp8", 1)
		sm := newStepModel(&s, h, &p, co)
		avg, mix := sm.terms(mean).Total(), sm.mixed(mean, q).Total()
		if tc.dense {
			if math.Abs(mix-avg) > 1e-9*avg {
				t.Errorf("%s: mixture %.6g s differs from the mean step %.6g s", tc.name, mix, avg)
			}
			continue
		}
		if !(mix < 0.8*avg) {
			t.Errorf("%s: mixture %.4g ms should be well below the mean step %.4g ms", tc.name, mix*1e3, avg*1e3)
		}
		if got := sm.mixed(mean, 1).Total(); got != avg {
			t.Errorf("%s: q = 1 gives %g, want the mean step %g", tc.name, got, avg)
		}
	}
}

// TestWeightOnlyKernels checks which deployments run weight-only GEMMs.
func TestWeightOnlyKernels(t *testing.T) {
	for _, tc := range []struct {
		prec, gpu string
		want      bool
	}{
		{"mxfp4", "h200", true},        // no FP4 tensor cores before Blackwell
		{"mxfp4", "b200", false},       // native FP4
		{"nvfp4", "h100-sxm", true},    //
		{"fp8", "a100-80gb", true},     // no FP8 tensor cores on Ampere
		{"fp8", "h100-sxm", false},     //
		{"int4-awq", "h100-sxm", true}, // W4A16 everywhere
		{"bf16", "h100-sxm", false},
		{"q4_k_m", "rtx-4090", false}, // GGUF has its own dequantization term
	} {
		p, err := LookupPrecision(tc.prec)
		if err != nil {
			t.Fatal(err)
		}
		if got := WeightOnly(&p, gpu(t, tc.gpu)); got != tc.want {
			t.Errorf("%s on %s: weight-only %v, want %v", tc.prec, tc.gpu, got, tc.want)
		}
	}
}

// TestBlockAndDequantCoefficients checks that the fp8-block and weight-only
// factors scale the weight-streaming and linear-compute terms, and only for
// the formats they name.
func TestBlockAndDequantCoefficients(t *testing.T) {
	co, _ := DefaultCoeffs().Family("vllm")
	co.Block, co.Dequant = 1, 1
	co2 := co
	co2.Block, co2.Dequant = 2, 3
	b := Batch{Decode: 16, DecodeCtx: 16 * 2000}
	for _, tc := range []struct {
		prec, gpu string
		factor    float64
	}{{"fp8-block", "h200", 2}, {"fp8", "h200", 1}, {"mxfp4", "h200", 3}, {"mxfp4", "b200", 1}} {
		p, _ := LookupPrecision(tc.prec)
		h := gpu(t, tc.gpu)
		s := summarize(llama8B(), tc.prec, "auto", 1)
		m1, m2 := newStepModel(&s, h, &p, co), newStepModel(&s, h, &p, co2)
		w1, w2 := m1.terms(b).Weights, m2.terms(b).Weights
		if math.Abs(w2/w1-tc.factor) > 1e-9 {
			t.Errorf("%s on %s: weight term ×%.3g, want ×%g", tc.prec, tc.gpu, w2/w1, tc.factor)
		}
	}
	if p, err := LookupPrecision("fp8_block"); err != nil || !p.Block || p.Compute != "fp8" {
		t.Errorf("fp8_block: %+v, %v", p, err)
	}
}

// TestAdmissionFootprint checks the admission rule of the pool engines:
// TensorRT-LLM's GUARANTEED_NO_EVICT scheduler reserves a request's whole
// length, vLLM and SGLang allocate KV as tokens come, so a running request
// holds its prompt and on average half its output.
func TestAdmissionFootprint(t *testing.T) {
	w := workload.FixedClosed(4000, 2000, 64)
	mem := MemoryReport{KVCapacityTokens: 100000}
	for _, tc := range []struct {
		eng  Engine
		want float64
	}{{TRTLLM, 16}, {VLLM, 20}, {SGLang, 20}} {
		c, err := Compile(gpu(t, "h200"), tc.eng, Options{}, &w, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.capacity(&mem); got != tc.want {
			t.Errorf("%s: %g requests fit in 100,000 KV tokens at 4000+2000, want %g", tc.eng, got, tc.want)
		}
	}
}

// TestLlamaCPPSlotPadding checks llama.cpp's per-slot context padding:
// each of the -np slots gets its context rounded up to 256 cells, so
// -c 4096 -np 10 (410 tokens a slot) allocates 10 × 512 cells, as a
// published llama.cpp log shows (kv_capacity.md, index id 68952056531).
func TestLlamaCPPSlotPadding(t *testing.T) {
	rep, err := Memory(llama8B(), gpu(t, "rtx-4090"), LlamaCPP, Options{Precision: "q4_k_m", MaxModelLen: 410, MaxNumSeqs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.KVCapacityTokens != 5120 {
		t.Errorf("10 slots of 410 tokens: %g cells, want 5120 (10 × 512)", rep.KVCapacityTokens)
	}
}

// TestMoEDecodeWeightsEveryEngine checks that a decode step's weight
// traffic is the dense bytes plus the expected distinct experts the batch
// routes to, E·(1 − (1 − k/E)^B) per MoE layer group, for every GPU engine
// family's coefficients and every batch size, not the active experts of one
// token (k) nor all of them (E).
func TestMoEDecodeWeightsEveryEngine(t *testing.T) {
	h := gpu(t, "rtx-5090")
	p, _ := LookupPrecision("bf16")
	s := summarize(moeModel(), "bf16", "auto", 1)
	if s.nMoE != 1 {
		t.Fatalf("%d MoE groups, want 1", s.nMoE)
	}
	g := s.moe[0]
	E, k := float64(g.Experts), float64(g.TopK)
	for _, fam := range []string{"vllm", "sglang", "trtllm", "llamacpp-cuda"} {
		co, got := DefaultCoeffs().Family(fam)
		if got != fam {
			t.Fatalf("%s: coefficients fall back to %s", fam, got)
		}
		sm := newStepModel(&s, h, &p, co)
		prev := 0.0
		for _, b := range []float64{1, 2, 4, 8, 16, 64, 256} {
			w := sm.terms(Batch{Decode: b, DecodeCtx: b * 512}).Weights
			want := sm.wPerBW * (s.DenseBytes + g.Bytes*E*(1-math.Pow(1-k/E, b)))
			if math.Abs(w-want) > 1e-9*want {
				t.Errorf("%s, batch %g: weights %.6g s, want %.6g s", fam, b, w, want)
			}
			if lo, hi := sm.wPerBW*(s.DenseBytes+g.Bytes*k), sm.wPerBW*(s.DenseBytes+g.Bytes*math.Min(E, k*b)); w < lo*(1-1e-9) || w > hi*(1+1e-9) {
				t.Errorf("%s, batch %g: weights %.4g s outside [k experts %.4g, min(E, kB) experts %.4g]", fam, b, w, lo, hi)
			}
			if w <= prev && b > 1 && k*b < E*4 {
				t.Errorf("%s, batch %g: weights %.4g s did not grow from %.4g s", fam, b, w, prev)
			}
			prev = w
		}
	}
}

// TestGDDRFactor checks the consumer-GPU memory-traffic factor: it divides
// the bandwidth of the weight and KV terms on GeForce cards only, leaves
// compute and overheads alone, and a factor of 0 (no consumer rows) is 1.
func TestGDDRFactor(t *testing.T) {
	p, _ := LookupPrecision("bf16")
	co, _ := DefaultCoeffs().Family("vllm")
	b := Batch{Decode: 8, DecodeCtx: 8 * 1000}
	s := summarize(llama8B(), "bf16", "bf16", 1)
	for _, tc := range []struct {
		gpu   string
		scale bool
	}{{"rtx-4090", true}, {"rtx-5080", true}, {"h100-sxm", false}, {"l40s", false}, {"rtx-pro-6000", false}} {
		h := gpu(t, tc.gpu)
		step := func(g float64) Terms {
			co.GDDR, co.GDDRGPUs = g, nil
			m := newStepModel(&s, h, &p, co)
			return m.terms(b)
		}
		base := step(0)
		if one := step(1); one != base {
			t.Errorf("%s: GDDR 1 changes the step: %+v vs %+v", tc.gpu, one, base)
		}
		got := step(1.25)
		want := 1.0
		if tc.scale {
			want = 1.25
		}
		// The KV term also holds the per-context-token latency (Ctx), which
		// is not memory traffic: it grows by less than the factor.
		kv := got.KV / base.KV
		if math.Abs(got.Weights/base.Weights-want) > 1e-12 || kv > want+1e-12 || (want > 1) != (kv > 1) {
			t.Errorf("%s: weights ×%.4f, KV ×%.4f; want ×%g", tc.gpu, got.Weights/base.Weights, kv, want)
		}
		if got.Compute != base.Compute || got.Overhead != base.Overhead || got.Comm != base.Comm {
			t.Errorf("%s: compute or fixed terms changed: %+v vs %+v", tc.gpu, got, base)
		}
	}
	// A per-GPU entry overrides the class value for its GPU only.
	co.GDDR, co.GDDRGPUs = 1.25, map[string]float64{"rtx-4090": 1.5}
	if a, b := co.GDDRFactor(gpu(t, "rtx-4090")), co.GDDRFactor(gpu(t, "rtx-5080")); a != 1.5 || b != 1.25 {
		t.Errorf("factors: rtx-4090 %g (want 1.5), rtx-5080 %g (want 1.25)", a, b)
	}
	shipped := DefaultCoeffs().Families["vllm"]
	vals := []float64{shipped.GDDR}
	for _, g := range shipped.GDDRGPUs {
		vals = append(vals, g)
	}
	for _, g := range vals {
		if g <= 1 || g > 1.5 {
			t.Errorf("shipped vllm GDDR factors %g %v, want fitted values in (1, 1.5]", shipped.GDDR, shipped.GDDRGPUs)
		}
	}
}

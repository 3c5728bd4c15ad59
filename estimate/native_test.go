package estimate

import (
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/workload"
)

// parentLike is the embedded parent's shape (parent/model/config.json).
func parentLike() *Summary {
	m := llama("parent", 8, 192, 8, 2, 512, 4096)
	m.TiedEmbeddings = true
	var s Summary
	Summarize(&s, m, &nativePrecision, kvTypes["fp32"], 4, 1)
	return &s
}

// TestNativeMemoryRule checks the native rule against the engine's layout
// worked out by hand: float32 weights (3,886,272 parameters), a float32 KV
// cache of isl + osl tokens per client, and no KV for a layer without
// attention.
func TestNativeMemoryRule(t *testing.T) {
	w := workload.FixedClosed(128, 64, 4)
	c, err := Compile(gpu(t, "cpu-local"), Native, Options{Precision: "bf16"}, &w, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc := c.NativeCoeffs()
	nc.MemHeap, nc.MemBuffers, nc.MemFixed, nc.MemGarbage = 1, 1, 0, 0
	c.SetNativeCoeffs(nc)
	m := llama("parent", 8, 192, 8, 2, 512, 4096)
	m.TiedEmbeddings = true
	var s Summary
	c.Summarize(&s, m)
	if s.TotalParams != 3886272 {
		t.Fatalf("%g parameters, want 3886272", s.TotalParams)
	}
	rep, ok := c.Memory(&s)
	if !ok {
		t.Fatalf("does not fit: %v", rep.Fail.Error())
	}
	if rep.WeightsBytes != 4*3886272 {
		t.Errorf("weights %g bytes, want float32 %d", rep.WeightsBytes, 4*3886272)
	}
	// 8 layers × (K + V) × 2 kv heads × 24 × 4 bytes × 192 tokens × 4 clients.
	if want := 8.0 * 2 * 48 * 4 * 192 * 4; rep.KVPoolBytes != want {
		t.Errorf("KV %g bytes, want %g", rep.KVPoolBytes, want)
	}
	m.Layers[3].Attention = nil
	c.Summarize(&s, m)
	rep2, _ := c.Memory(&s)
	if want := 7.0 * 2 * 48 * 4 * 192 * 4; rep2.KVPoolBytes != want || rep2.TotalBytes() >= rep.TotalBytes() {
		t.Errorf("without layer 3's attention: KV %g (want %g), total %g vs %g", rep2.KVPoolBytes, want, rep2.TotalBytes(), rep.TotalBytes())
	}
	for _, bad := range []Options{{Precision: "q4_0"}, {KVDType: "fp8"}, {TP: 2}} {
		if _, err := Compile(gpu(t, "cpu-local"), Native, bad, &w, nil); err == nil || !strings.Contains(err.Error(), "native engine") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// serveReference runs engine.Serve's scheduler request by request and
// step by step (no grouping, no closed-form stretches): the reference
// nativeLoop must reproduce.
func serveReference(m *stepModel, conc, nreq, isl, osl, budget int) (ttft, tpot, e2e, wall float64) {
	type req struct {
		arrival, first float64
		fed, gen       int
	}
	var active []*req
	sent, doneN := 0, 0
	t := 0.0
	for ; sent < conc && sent < nreq; sent++ {
		active = append(active, &req{arrival: 0})
	}
	for doneN < nreq {
		var b Batch
		room := budget
		var chunks []int
		for _, r := range active {
			if r.fed == isl {
				b.Decode++
				b.DecodeCtx += float64(isl + r.gen)
			}
		}
		for _, r := range active {
			c := 0
			if r.fed < isl && room > 0 {
				c = min(room, isl-r.fed)
				room -= c
				b.Prefill += float64(c)
				b.PrefillAtt += float64(c) * (float64(r.fed) + float64(c+1)/2)
				b.PrefillSeq++
				if r.fed+c == isl {
					b.PrefillDone++
				}
			}
			chunks = append(chunks, c)
		}
		t += m.time(b)
		kept := active[:0]
		for i, r := range active {
			switch {
			case chunks[i] > 0:
				r.fed += chunks[i]
				if r.fed == isl {
					r.first, r.gen = t, 1
				}
			case r.fed == isl:
				r.gen++
			}
			if r.gen < osl {
				kept = append(kept, r)
				continue
			}
			ttft += r.first - r.arrival
			e2e += t - r.arrival
			if osl > 1 {
				tpot += (t - r.first) / float64(osl-1)
			}
			doneN++
			if sent < nreq {
				sent++
				kept = append(kept, &req{arrival: t})
			}
		}
		active = kept
	}
	n := float64(nreq)
	return ttft / n, tpot / n, e2e / n, t
}

// TestNativeLoopMatchesReference: the analytic loop (grouped, with
// closed-form decode stretches) against the plain step-by-step reference,
// including prompts that need several steps (c·isl > 512), outputs
// shorter than the prefill phase and a run whose last clients idle.
func TestNativeLoopMatchesReference(t *testing.T) {
	hw := gpu(t, "cpu-local")
	arch := llama("parent", 8, 192, 8, 2, 512, 4096)
	for _, tc := range []struct{ isl, osl, conc, nreq int }{{128, 64, 4, 64}, {128, 64, 1, 16}, {300, 32, 6, 64}, {64, 2, 16, 64}, {1000, 8, 3, 10}, {16, 200, 8, 64}, {128, 1, 4, 16}} {
		w := workload.FixedClosed(tc.isl, tc.osl, tc.conc)
		w.NumRequests = tc.nreq
		c, err := Compile(hw, Native, Options{}, &w, nil)
		if err != nil {
			t.Fatal(err)
		}
		var s Summary
		c.Summarize(&s, arch)
		p := c.PriceSummary(&s)
		m := c.stepModel(&s)
		rt, rp, re, wall := serveReference(&m, tc.conc, tc.nreq, tc.isl, tc.osl, nativePrefill)
		for _, pair := range []struct {
			name     string
			got, ref float64
		}{{"TTFT", p.TTFT - c.nat.Alpha0, rt}, {"TPOT", p.TPOT, rp}, {"E2E", p.E2E - c.nat.Alpha0, re}, {"output tok/s", p.OutputTokS, float64(tc.nreq*tc.osl) / wall}} {
			if math.Abs(pair.got-pair.ref) > 1e-9*math.Abs(pair.ref) {
				t.Errorf("%+v: %s loop %.6g, reference %.6g", tc, pair.name, pair.got, pair.ref)
			}
		}
		if n := testing.AllocsPerRun(20, func() { c.PriceSummary(&s) }); n != 0 {
			t.Errorf("%+v: PriceSummary allocates %.0f times", tc, n)
		}
	}
}

// TestNativeRemovedSubBlocksPriceLess: removing attention or an MLP from a
// layer, or narrowing its FFN, lowers TPOT and memory.
func TestNativeRemovedSubBlocksPriceLess(t *testing.T) {
	w := workload.FixedClosed(128, 64, 4)
	c, err := Compile(gpu(t, "cpu-local"), Native, Options{}, &w, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := llama("parent", 8, 192, 8, 2, 512, 4096)
	pb := c.Price(base)
	for name, edit := range map[string]func(m []int){
		"no attention": func([]int) { base.Layers[2].Attention = nil },
		"no MLP":       func([]int) { base.Layers[2].MLP = nil },
		"FFN 256":      func([]int) { base.Layers[2].MLP.Width = 256 },
	} {
		base = llama("parent", 8, 192, 8, 2, 512, 4096)
		edit(nil)
		p := c.Price(base)
		if !(p.TPOT < pb.TPOT) || !(p.TotalBytes < pb.TotalBytes) {
			t.Errorf("%s: TPOT %.4g vs %.4g, memory %g vs %g", name, p.TPOT, pb.TPOT, p.TotalBytes, pb.TotalBytes)
		}
	}
}

// TestParseNativeCoeffs rejects invalid files.
func TestParseNativeCoeffs(t *testing.T) {
	for _, bad := range []string{`{}`, `{"machines":{}}`, `{"machines":{"x":{"sgemm_flops":0,"bandwidth_bps":1}}}`,
		`{"machines":{"x":{"sgemm_flops":1,"bandwidth_bps":1,"lin":-1}}}`, `not json`} {
		if _, err := ParseNativeCoeffs([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if f := DefaultNativeCoeffs(); f.Machines["cpu-local"].SgemmFLOPS <= 0 {
		t.Fatalf("embedded file: %+v", f)
	}
}

// BenchmarkNativePrice prices the parent for the native engine (the
// search's inner loop on cpu-local) beside the vLLM analytic path on the
// same model, whose rate is the peer: compare the two ns/op.
func BenchmarkNativePrice(b *testing.B) {
	m := llama("parent", 8, 192, 8, 2, 512, 4096)
	for _, tc := range []struct {
		name string
		eng  Engine
		hw   string
		conc int
	}{{"native/c4", Native, "cpu-local", 4}, {"native/c32", Native, "cpu-local", 32}, {"vllm/c4", VLLM, "h100-sxm", 4}} {
		b.Run(tc.name, func(b *testing.B) {
			w := workload.FixedClosed(128, 64, tc.conc)
			c, err := Compile(gpu(b, tc.hw), tc.eng, Options{}, &w, nil)
			if err != nil {
				b.Fatal(err)
			}
			var s Summary
			c.Summarize(&s, m)
			b.ReportAllocs()
			for b.Loop() {
				c.PriceSummary(&s)
			}
		})
	}
}

// TestBusiestRows: the packed path's row blocks of 96 taken in order by
// the least-loaded of two threads, worked by hand.
func TestBusiestRows(t *testing.T) {
	for _, c := range []struct{ rows, threads, want float64 }{
		{1, 2, 1}, {8, 2, 8}, {96, 2, 96}, // one block: one core
		{97, 2, 96},    // 96 | 1
		{192, 2, 96},   // 96 | 96
		{200, 2, 104},  // 96+8 | 96
		{516, 2, 288},  // six blocks, the last of 36 rows: 3×96 | 2×96+36
		{516, 1, 516},  // one thread does everything
		{516, 4, 192},  // 2×96 | 96+36 | 96 | 96
		{1000, 3, 384}, // eleven blocks (last 40): 4×96 | 3×96+40 | 3×96
	} {
		if got := busiestRows(c.rows, c.threads); got != c.want {
			t.Errorf("busiestRows(%g, %g) = %g, want %g", c.rows, c.threads, got, c.want)
		}
	}
}

// TestNativeAttentionPartition: decode steps below the serial threshold
// run on one thread; a prompt chunk behind the decoders lands whole on
// the last thread (the tasks are split in contiguous runs of sequences,
// decoders first), two prompts alone split evenly.
func TestNativeAttentionPartition(t *testing.T) {
	n := nativeTerms{threads: 2, attnWork: 192} // 8 heads × 24 dims
	for _, c := range []struct {
		name            string
		b               Batch
		pairs, seqs     float64
		serialThreshold bool
	}{
		{"decode", Batch{Decode: 4, DecodeCtx: 4 * 160}, 640, 4, true},
		{"prompt behind decoders", Batch{Decode: 3, DecodeCtx: 3 * 200, Prefill: 512, PrefillSeq: 1, PrefillAtt: 512 * 256}, 512*256 + 200, 2, false},
		{"two prompts", Batch{Prefill: 512, PrefillSeq: 2, PrefillAtt: 2 * 256 * 128}, 256 * 128, 1, false},
	} {
		if got := (c.b.PrefillAtt + c.b.DecodeCtx) * n.attnWork; (got < nativeAttnSerial) != c.serialThreshold {
			t.Fatalf("%s: %g multiply-adds against the threshold %d", c.name, got, nativeAttnSerial)
		}
		p, s := n.attention(c.b)
		if p != c.pairs || s != c.seqs {
			t.Errorf("%s: busiest thread has %g pairs of %g sequences, want %g of %g", c.name, p, s, c.pairs, c.seqs)
		}
	}
}

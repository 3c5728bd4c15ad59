package trained

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/train"
)

// The proxy rank-correlation harness (issue 8: "test the proxies you choose
// against post-recovery quality and report their rank correlation"). It is
// slow (it distils every child twice), so it runs only when asked, on the
// embedded parent as it is at the time:
//
//	nice -n 10 go test -run RankCorrelation -v -timeout 3h ./search/trained -args -rankcorr -rankcorr.tokens=40960 -rankcorr.brief=8192 -rankcorr.out=/tmp/rankcorr.md
//
// proxy/PROXIES.md holds the results and how to read them.
var (
	rankCorr       = flag.Bool("rankcorr", false, "run the proxy rank-correlation harness (slow: distils every child)")
	rankCorrTokens = flag.Int64("rankcorr.tokens", 40960, "recovery distillation tokens per child (batch 8 × 128)")
	rankCorrBrief  = flag.Int64("rankcorr.brief", 8192, "tokens of the brief-training proxy per child (Minitron++'s top-k training)")
	rankCorrOut    = flag.String("rankcorr.out", "", "also write the Markdown table to this file")
)

// rankCorrChildren are the children the harness ranks: layers dropped by
// block influence, FFN widths, query heads within their KV groups, hidden
// channels, and mixtures, each cut by prune.PlanFromScores.
func rankCorrChildren(L int) []struct {
	name string
	t    prune.Targets
} {
	all := func(v int) []int {
		s := make([]int, L)
		for i := range s {
			s[i] = v
		}
		return s
	}
	return []struct {
		name string
		t    prune.Targets
	}{
		{"drop 1 layer", prune.Targets{DropLayers: 1}},
		{"drop 2 layers", prune.Targets{DropLayers: 2}},
		{"drop 3 layers", prune.Targets{DropLayers: 3}},
		{"ffn 256", prune.Targets{Neurons: all(256)}},
		{"ffn 128", prune.Targets{Neurons: all(128)}},
		{"heads 4 (2 per group)", prune.Targets{Heads: all(4)}},
		{"hidden 128", prune.Targets{Hidden: 128}},
		{"hidden 160, ffn 384", prune.Targets{Hidden: 160, Neurons: all(384)}},
		{"drop 1, heads 6, ffn 384", prune.Targets{DropLayers: 1, Heads: all(6), Neurons: all(384)}},
		{"drop 2, hidden 160", prune.Targets{DropLayers: 2, Hidden: 160}},
	}
}

// retained is the harness's retained-importance proxy: the mean over the
// four kinds of unit (hidden channels, query heads, MLP neurons, layers by
// block influence) of the share of the parent's total score the child
// keeps.
func retained(s *importance.Scores, lay *prune.Layout) float64 {
	sum := func(v []float64) (t float64) {
		for _, x := range v {
			t += x
		}
		return t
	}
	hid := 1.0
	if lay.Hidden != nil {
		var k float64
		for _, c := range lay.Hidden {
			k += s.Hidden[c]
		}
		hid = k / sum(s.Hidden)
	}
	var hAll, hKept, nAll, nKept, bAll, bKept float64
	for l := range s.LayerBI {
		hAll += sum(s.Heads[l])
		nAll += sum(s.Neurons[l])
		bAll += s.LayerBI[l]
	}
	for _, ll := range lay.Layers {
		bKept += s.LayerBI[ll.Parent]
		for _, h := range ll.Heads {
			if h >= 0 {
				hKept += s.Heads[ll.Parent][h]
			}
		}
		for _, n := range ll.Neurons {
			if n >= 0 {
				nKept += s.Neurons[ll.Parent][n]
			}
		}
	}
	return (hid + hKept/hAll + nKept/nAll + bKept/bAll) / 4
}

// TestRankCorrelation ranks ten children of the embedded parent by four
// proxies a search can compute (retained importance, KL to the parent and
// loss of the child pruned without training, and the loss after the brief
// distillation Minitron++ gives its top-k, Measurer) and by their
// quality after recovery (held-out test loss after distillation from the
// parent: package distill's KD loss, forward KL at T = 1, through train's
// loop, the recovery stage's recipe), and prints one Markdown table: every
// child, then Spearman's ρ and Kendall's τ-b of each proxy with the
// recovered loss. Data: the parent's embedded splits (importance on 32
// validation rows, the proxies on 16 others, training on the train sample,
// quality on 64 test rows, all of 128 tokens).
func TestRankCorrelation(t *testing.T) {
	if !*rankCorr {
		t.Skip("slow harness: run with -rankcorr (see the comment above)")
	}
	dir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	par, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const T, B = 128, 8
	rec := Options{Tokens: *rankCorrTokens, Batch: B, SeqLen: T, Seed: 1}
	brief := Options{Tokens: *rankCorrBrief, Batch: B, SeqLen: T, Seed: 1}
	val := embeddedRows(t, dir, "validation", 48, T)
	calib, proxyRows := val[:32], val[32:48]
	testRows := embeddedRows(t, dir, "test", 64, T)
	trainRows := embeddedRows(t, dir, "train-sample", max(rec.Steps(), brief.Steps())*B, T)
	ctx := context.Background()

	sc, err := importance.Compute(ctx, par, calib, importance.Options{NoSkipLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	ps := prune.Scores{Hidden: f32(sc.Hidden), Layers: f32(sc.LayerBI)}
	for l := range sc.LayerBI {
		ps.Heads = append(ps.Heads, f32(sc.Heads[l]))
		ps.Neurons = append(ps.Neurons, f32(sc.Neurons[l]))
	}
	arch := par.Arch()
	parentTest, err := train.MeanLoss(par, testRows, B)
	if err != nil {
		t.Fatal(err)
	}
	untrained, err := search.NewKLMeasurer(ctx, par, proxyRows, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	briefM, err := NewMeasurer(ctx, par, proxyRows, trainRows, brief)
	if err != nil {
		t.Fatal(err)
	}
	defer briefM.Close()
	recM, err := NewMeasurer(ctx, par, testRows, trainRows, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer recM.Close()

	var b strings.Builder
	fmt.Fprintf(&b, "Parent: embedded (`parent/model`), test loss %.4f. Recovery: %d tokens of distillation per child (%d steps of %d × %d, KD at T 1, LR 1e-3 cosine); brief-training proxy: %d tokens (%d steps), scored on the proxy rows.\n\n",
		parentTest, rec.Steps()*B*T, rec.Steps(), B, T, brief.Steps()*B*T, brief.Steps())
	b.WriteString("| child | params | retained | KL | pruned loss | briefly trained loss | test loss before | test loss after recovery |\n|---|---|---|---|---|---|---|---|\n")
	var ret, kl, loss, briefLoss, after []float64
	start := time.Now()
	for _, c := range rankCorrChildren(len(arch.Layers)) {
		plan, err := prune.PlanFromScores(arch, ps, c.t)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		lay, err := prune.Resolve(arch, plan)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		u, err := untrained.Measure(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		bm, err := briefM.Measure(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		rm, err := recM.Measure(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := proxy.Child(par, plan)
		if err != nil {
			t.Fatal(err)
		}
		r := retained(sc, lay)
		ret, kl, loss, briefLoss, after = append(ret, -r), append(kl, u.KL), append(loss, u.Loss), append(briefLoss, bm.Loss), append(after, rm.Loss)
		fmt.Fprintf(&b, "| %s | %d | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f |\n", c.name, ch.NumParams(), r, u.KL, u.Loss, bm.Loss, rm.UntrainedLoss, rm.Loss)
		t.Logf("%s done, %v", c.name, time.Since(start).Round(time.Second))
	}
	b.WriteString("\n| proxy | Spearman ρ | Kendall τ-b |\n|---|---|---|\n")
	for _, p := range []struct {
		name string
		v    []float64
	}{{"retained importance (negated)", ret}, {"KL to the parent, untrained", kl}, {"loss of the pruned child, untrained", loss},
		{fmt.Sprintf("loss after %d tokens of brief distillation", brief.Steps()*B*T), briefLoss}} {
		rho, err := proxy.Spearman(p.v, after)
		if err != nil {
			t.Fatal(err)
		}
		tau, err := proxy.Kendall(p.v, after)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "| %s | %+.3f | %+.3f |\n", p.name, rho, tau)
		if math.IsNaN(rho) || math.IsNaN(tau) {
			t.Errorf("%s: no rank correlation (constant values)", p.name)
		}
	}
	fmt.Fprintf(&b, "\n%.0f s for the ten children (%s).\n", time.Since(start).Seconds(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	t.Logf("\n%s", b.String())
	if *rankCorrOut != "" {
		if err := output.WriteFile(*rankCorrOut, []byte(b.String()), true); err != nil {
			t.Fatal(err)
		}
	}
}

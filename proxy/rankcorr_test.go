package proxy

import (
	"context"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/train"
)

// The rank-correlation harness is slow (it fine-tunes every child), so it
// runs only when asked:
//
//	nice -n 10 go test -run RankCorrelation -v -timeout 2h ./proxy -args -rankcorr -rankcorr.steps=100
var (
	rankCorr      = flag.Bool("rankcorr", false, "run the proxy rank-correlation harness (slow: fine-tunes every child)")
	rankCorrSteps = flag.Int("rankcorr.steps", 100, "recovery steps per child (batch 8 × 128 tokens)")
)

// rcTok adapts the tokenizer to train.Encoder.
type rcTok struct{ t *tokenizer.Tokenizer }

func (e rcTok) Encode(s string) []int32 {
	ids, _ := e.t.Encode(s, false)
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out
}

// rcRows tokenizes documents of one split until n rows of T+1 tokens.
func rcRows(t *testing.T, tok rcTok, docs []corpus.Document, sep int32, T, n int) [][]int32 {
	var rows [][]int32
	for i := 0; i < len(docs) && len(rows) < n; i += 8 {
		r, _, err := train.Rows(tok, docs[i:min(i+8, len(docs))], sep, T)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	if len(rows) < n {
		t.Fatalf("only %d rows of %d tokens in the split, want %d", len(rows), T+1, n)
	}
	return rows[:n]
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
	share := func(all float64, kept float64) float64 { return kept / all }
	var hid float64
	if lay.Hidden == nil {
		hid = 1
	} else {
		var k float64
		for _, c := range lay.Hidden {
			k += s.Hidden[c]
		}
		hid = share(sum(s.Hidden), k)
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
	return (hid + share(hAll, hKept) + share(nAll, nKept) + share(bAll, bKept)) / 4
}

// TestRankCorrelation measures how well the proxies a search can compute
// without training (retained importance, KL to the parent, loss of the
// pruned child) rank children of the embedded parent by their quality after
// recovery (held-out loss after fine-tuning on the training split with the
// plain cross-entropy of package train; distillation is not on this
// branch). It prints every child and the Spearman correlations.
func TestRankCorrelation(t *testing.T) {
	if !*rankCorr {
		t.Skip("slow harness: run with -rankcorr (see the comment above)")
	}
	root, ok := shareddata.ModuleRoot()
	if !ok {
		t.Skip("module root not found")
	}
	docs, err := corpus.All(root)
	if err != nil {
		t.Skipf("corpus absent: %v", err)
	}
	par, dir := loadParent(t)
	tk, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok := rcTok{tk}
	const T = 128
	sep := int32(par.Arch().EOS[0])
	steps := *rankCorrSteps
	trainRows := rcRows(t, tok, corpus.Split(docs, corpus.Train), sep, T, steps*8)
	valRows := rcRows(t, tok, corpus.Split(docs, corpus.Validation), sep, T, 48)
	calib, proxyRows := valRows[:32], valRows[32:48]
	testRows := rcRows(t, tok, corpus.Split(docs, corpus.Test), sep, T, 64)
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
	L := len(arch.Layers)
	all := func(v int) []int {
		s := make([]int, L)
		for i := range s {
			s[i] = v
		}
		return s
	}
	children := []struct {
		name string
		t    prune.Targets
	}{
		{"drop 1 layer", prune.Targets{DropLayers: 1}},
		{"drop 2 layers", prune.Targets{DropLayers: 2}},
		{"drop 3 layers", prune.Targets{DropLayers: 3}},
		{"ffn 256", prune.Targets{Neurons: all(256)}},
		{"ffn 128", prune.Targets{Neurons: all(128)}},
		{"heads 4 (2/group)", prune.Targets{Heads: all(4)}},
		{"hidden 128", prune.Targets{Hidden: 128}},
		{"hidden 160, ffn 384", prune.Targets{Hidden: 160, Neurons: all(384)}},
		{"drop 1, heads 6, ffn 384", prune.Targets{DropLayers: 1, Heads: all(6), Neurons: all(384)}},
		{"drop 2, hidden 160", prune.Targets{DropLayers: 2, Hidden: 160}},
	}
	ref, err := NewReference(ctx, par, proxyRows, Options{})
	if err != nil {
		t.Fatal(err)
	}
	parentTest, err := train.MeanLoss(par, testRows, 8)
	if err != nil {
		t.Fatal(err)
	}
	var ret, kl, loss, after []float64
	var b strings.Builder
	fmt.Fprintf(&b, "parent: test loss %.4f; %d recovery steps × 8 × %d tokens per child (plain fine-tuning, LR 1e-3 cosine to 1e-4)\n", parentTest, steps, T)
	fmt.Fprintf(&b, "%-26s %9s %9s %8s %9s %11s %11s\n", "child", "params", "retained", "KL", "loss", "test before", "test after")
	start := time.Now()
	for _, c := range children {
		plan, err := prune.PlanFromScores(arch, ps, c.t)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		lay, err := prune.Resolve(arch, plan)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		child, err := Child(par, plan)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		res, err := ref.Score(ctx, child, Options{})
		if err != nil {
			t.Fatal(err)
		}
		before, err := train.MeanLoss(child, testRows, 8)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(child, trainRows, testRows[:16], train.Options{Steps: steps, Batch: 8, SeqLen: T, LR: 1e-3, MinLR: train.Ptr(1e-4), Warmup: train.Ptr(max(1, steps/10)), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(ctx); err != nil {
			t.Fatalf("%s: recovery: %v", c.name, err)
		}
		post, err := train.MeanLoss(child, testRows, 8)
		if err != nil {
			t.Fatal(err)
		}
		r := retained(sc, lay)
		ret, kl, loss, after = append(ret, r), append(kl, res.KL), append(loss, res.Loss), append(after, post)
		fmt.Fprintf(&b, "%-26s %9d %9.4f %8.4f %9.4f %11.4f %11.4f\n", c.name, child.NumParams(), r, res.KL, res.Loss, before, post)
	}
	neg := make([]float64, len(ret))
	for i, r := range ret {
		neg[i] = -r // less retained importance should mean worse (higher) loss
	}
	fmt.Fprintf(&b, "Spearman with the test loss after recovery (1 = same order):\n")
	for _, p := range []struct {
		name string
		v    []float64
	}{{"retained importance (negated)", neg}, {"KL to the parent", kl}, {"loss of the pruned child", loss}} {
		rho, err := Spearman(p.v, after)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  %-30s %+.3f\n", p.name, rho)
		if math.IsNaN(rho) {
			t.Errorf("%s: no rank correlation (constant values)", p.name)
		}
	}
	fmt.Fprintf(&b, "proxy tokens: %d (parent reference) + %d per child; %.0f s in all on a loaded machine\n", ref.Tokens(), ref.Tokens(), time.Since(start).Seconds())
	t.Logf("\n%s", b.String())
}

package train

import (
	"context"
	"math"
	"testing"

	"github.com/autocompress/autocompress/engine"
)

// ceLogits is cross-entropy written on the logits, in float64, as a
// LogitLoss: a reference for the FromLogits seam.
type ceLogits struct{}

func (ceLogits) Logits(_ context.Context, logits []float32, b *Batch, vocab int, d []float32) (float64, error) {
	n := b.B * b.T
	var sum float64
	for i := range n {
		row := logits[i*vocab : (i+1)*vocab]
		mx := math.Inf(-1)
		for _, z := range row {
			mx = math.Max(mx, float64(z))
		}
		var s float64
		for _, z := range row {
			s += math.Exp(float64(z) - mx)
		}
		lse := mx + math.Log(s)
		tg := int(b.Targets[i])
		sum += lse - float64(row[tg])
		for j, z := range row {
			p := math.Exp(float64(z) - lse)
			if j == tg {
				p--
			}
			d[i*vocab+j] = float32(p / float64(n))
		}
	}
	return sum / float64(n), nil
}

// TestFromLogitsMatchesCrossEntropy: the logit seam with cross-entropy
// written by hand gives the engine's loss and every gradient.
func TestFromLogitsMatchesCrossEntropy(t *testing.T) {
	rows := patternRows(4, 16, 16, 3)
	b := &Batch{B: 4, T: 16, Rows: []int{0, 1, 2, 3}}
	for _, r := range rows {
		b.Inputs = append(b.Inputs, r[:16]...)
		b.Targets = append(b.Targets, r[1:]...)
	}
	run := func(l Loss) (float64, []float32) {
		m, err := engine.New(tinyArch(16), 5)
		if err != nil {
			t.Fatal(err)
		}
		m.ZeroGrad()
		loss, err := l.Step(context.Background(), m, b)
		if err != nil {
			t.Fatal(err)
		}
		return loss, append([]float32(nil), m.Grads()...)
	}
	l1, g1 := run(CrossEntropy{})
	l2, g2 := run(FromLogits(ceLogits{}))
	if math.Abs(l1-l2) > 1e-5 {
		t.Errorf("loss %.7f (engine) vs %.7f (logit seam)", l1, l2)
	}
	var worst, scale float64
	for i := range g1 {
		worst = math.Max(worst, math.Abs(float64(g1[i]-g2[i])))
		scale = math.Max(scale, math.Abs(float64(g1[i])))
	}
	if scale == 0 || worst > 1e-4*scale {
		t.Errorf("gradients differ by up to %.3g (largest gradient %.3g)", worst, scale)
	}
}

// scaled multiplies the cross-entropy gradient by k, to make gradient
// norms that clipping would act on.
type scaled struct{ k float32 }

func (s scaled) Step(ctx context.Context, m *engine.Model, b *Batch) (float64, error) {
	l, err := CrossEntropy{}.Step(ctx, m, b)
	for i := range m.Grads() {
		m.Grads()[i] *= s.k
	}
	return l, err
}

// TestExplicitZeroOptions: an explicit 0 for warm-up, minimum LR, weight
// decay and clipping means 0, not "use the default" (which they meant
// before these fields became pointers).
func TestExplicitZeroOptions(t *testing.T) {
	o := Options{Steps: 4, Batch: 2, SeqLen: 16, LR: 1e-2,
		Warmup: Ptr(0), MinLR: Ptr(0.0), WeightDecay: Ptr(0.0), Clip: Ptr(0.0), Beta1: Ptr(0.0),
		Loss: scaled{1000}}
	var infos []StepInfo
	o.OnStep = func(s StepInfo) {
		if !s.Eval {
			infos = append(infos, s)
		}
	}
	tr := newTrainer(t, o)
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tr.Opt.WeightDecay != 0 || tr.Opt.Beta1 != 0 {
		t.Errorf("weight decay %g, beta1 %g: want the explicit 0", tr.Opt.WeightDecay, tr.Opt.Beta1)
	}
	if len(infos) != 4 {
		t.Fatalf("%d step callbacks, want 4", len(infos))
	}
	if infos[0].LR != 1e-2 {
		t.Errorf("step 0 LR %g: with warm-up 0 the first step runs at the peak 1e-2", infos[0].LR)
	}
	// Cosine to MinLR 0 over steps 0..3: the last step is at lr·(1+cos(3π/4))/2.
	if want := 1e-2 * 0.5 * (1 + math.Cos(math.Pi*3/4)); math.Abs(infos[3].LR-want) > 1e-12 {
		t.Errorf("step 3 LR %g, want %g (min LR 0)", infos[3].LR, want)
	}
	// Clip 0 leaves the gradients as they are: their norm is the one
	// reported, far above the default limit of 1.
	var s float64
	for _, g := range tr.Model.Grads() {
		s += float64(g) * float64(g)
	}
	if n := math.Sqrt(s); infos[3].GradNorm <= 1 || math.Abs(n-infos[3].GradNorm) > 1e-3*n {
		t.Errorf("gradient norm after the step %g, reported %g: clipping 0 must leave them unclipped", n, infos[3].GradNorm)
	}

	// And nil takes the defaults.
	d := (&Options{Steps: 100}).EnsureDefaults()
	if *d.Warmup != 5 || math.Abs(*d.MinLR-3e-4) > 1e-15 || *d.WeightDecay != 0.1 || *d.Clip != 1 || *d.Beta1 != 0.9 || *d.Beta2 != 0.95 {
		t.Errorf("defaults: warm-up %d, min LR %g, weight decay %g, clip %g, betas %g %g", *d.Warmup, *d.MinLR, *d.WeightDecay, *d.Clip, *d.Beta1, *d.Beta2)
	}
}

// TestTagGuardsResume: a checkpoint made with another Options.Tag is refused.
func TestTagGuardsResume(t *testing.T) {
	ckpt := t.TempDir() + "/c"
	a := newTrainer(t, Options{Steps: 1, Batch: 2, SeqLen: 16, CheckpointPath: ckpt, Tag: "kd T=2"})
	if _, err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := newTrainer(t, Options{Steps: 1, Batch: 2, SeqLen: 16, Tag: "kd T=1"})
	if err := b.Resume(ckpt); err == nil {
		t.Fatal("resumed a checkpoint with another tag")
	}
	c := newTrainer(t, Options{Steps: 1, Batch: 2, SeqLen: 16, Tag: "kd T=2"})
	if err := c.Resume(ckpt); err != nil {
		t.Fatal(err)
	}
}

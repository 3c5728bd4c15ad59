package distill

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/autocompress/autocompress/train"
)

// fixed is a Teacher returning given logits.
type fixed struct{ tl *TeacherLogits }

func (f fixed) Logits(context.Context, *train.Batch) (*TeacherLogits, error) { return f.tl, nil }

func randLogits(r *rand.Rand, n int, scale float64) []float32 {
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(scale * r.NormFloat64())
	}
	return z
}

// sparseOf keeps the k largest of each row of dense (N, V) over [0, shared).
func sparseOf(dense []float32, N, V, shared, k int) *TeacherLogits {
	tl := &TeacherLogits{K: k, IDs: make([]int32, N*k), Vals: make([]float32, N*k)}
	for i := range N {
		TopK(tl.IDs[i*k:(i+1)*k], tl.Vals[i*k:(i+1)*k], dense[i*V:i*V+shared])
	}
	return tl
}

// TestKDGradientFiniteDifferences checks ∂L/∂z_s of the KD loss against
// central differences of the loss, for a dense and a top-k teacher, with
// a temperature, both terms weighted, and a padded student vocabulary
// (ids 5, 6 are padding: they get CE gradient only).
func TestKDGradientFiniteDifferences(t *testing.T) {
	const B, T, V, shared, teacherV = 2, 3, 7, 5, 6
	N := B * T
	r := rand.New(rand.NewPCG(1, 2))
	zt := randLogits(r, N*teacherV, 2)
	b := &train.Batch{B: B, T: T, Targets: []int32{0, 4, 2, 1, 6, 3}}
	for _, tc := range []struct {
		name string
		tl   *TeacherLogits
	}{
		{"dense", &TeacherLogits{Dense: zt, Vocab: teacherV}},
		{"top3", sparseOf(zt, N, teacherV, shared, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kd := &KD{Teacher: fixed{tc.tl}, Temperature: 2, KDWeight: 0.7, CEWeight: 0.3, Shared: shared}
			zs := randLogits(r, N*V, 1.5)
			d := make([]float32, N*V)
			if _, err := kd.Logits(context.Background(), zs, b, V, d); err != nil {
				t.Fatal(err)
			}
			loss := func(z []float32) float64 {
				l, err := kd.Logits(context.Background(), z, b, V, make([]float32, N*V))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			const h = 1e-2
			nonzero := 0
			for j := range zs {
				z := slices.Clone(zs)
				z[j] = zs[j] + h
				up := loss(z)
				z[j] = zs[j] - h
				fd := (up - loss(z)) / (2 * h)
				if math.Abs(fd-float64(d[j])) > 2e-5+1e-3*math.Abs(fd) {
					t.Errorf("logit %d (row %d, id %d): analytic %.7f, finite differences %.7f", j, j/V, j%V, d[j], fd)
				}
				if fd != 0 {
					nonzero++
				}
			}
			if nonzero < len(zs)/2 {
				t.Errorf("only %d of %d finite differences nonzero: the check cannot see the gradient", nonzero, len(zs))
			}
		})
	}
}

// TestKDByHand: two ids, teacher logits (ln 3, 0), student (0, 0), T = 1:
// p = (3/4, 1/4), q = (1/2, 1/2), KL = 3/4 ln(3/2) + 1/4 ln(1/2) and
// ∂KL/∂z_s = q − p = (−1/4, 1/4). At T = 2 the teacher is (√3, 1)/(√3+1)
// and the loss is 4·KL with gradient 2·(q − p).
func TestKDByHand(t *testing.T) {
	b := &train.Batch{B: 1, T: 1, Targets: []int32{0}}
	zt := []float32{float32(math.Log(3)), 0}
	for _, T := range []float64{1, 2} {
		kd := &KD{Teacher: fixed{&TeacherLogits{Dense: zt, Vocab: 2}}, Temperature: T, KDWeight: 1, Shared: 2}
		d := make([]float32, 2)
		l, err := kd.Logits(context.Background(), []float32{0, 0}, b, 2, d)
		if err != nil {
			t.Fatal(err)
		}
		s := math.Pow(3, 1/T)
		p0, p1 := s/(s+1), 1/(s+1)
		want := T * T * (p0*math.Log(p0/0.5) + p1*math.Log(p1/0.5))
		if math.Abs(l-want) > 1e-7 { // ln 3 is rounded to float32
			t.Errorf("T=%g: loss %.9f, want %.9f", T, l, want)
		}
		if g := T * (0.5 - p0); math.Abs(float64(d[0])-g) > 1e-7 || math.Abs(float64(d[1])+g) > 1e-7 {
			t.Errorf("T=%g: gradient %v, want (%g, %g)", T, d, g, -g)
		}
	}
	if want := 0.75*math.Log(1.5) + 0.25*math.Log(0.5); math.Abs(want-0.1308120) > 1e-6 {
		t.Fatalf("arithmetic: %v", want)
	}
}

// TestKDSameModelIsZero: a student equal to its teacher has zero KL and
// zero KD gradient.
func TestKDSameModelIsZero(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	z := randLogits(r, 4*9, 3)
	kd := &KD{Teacher: fixed{&TeacherLogits{Dense: z, Vocab: 9}}, Temperature: 1.5, KDWeight: 1, Shared: 9}
	d := make([]float32, len(z))
	l, err := kd.Logits(context.Background(), z, &train.Batch{B: 2, T: 2, Targets: make([]int32, 4)}, 9, d)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(l) > 1e-12 || slices.ContainsFunc(d, func(v float32) bool { return math.Abs(float64(v)) > 1e-7 }) {
		t.Errorf("loss %g, gradient %v: want 0", l, d)
	}
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		n := 1 + r.IntN(40)
		z := make([]float32, n)
		for i := range z {
			z[i] = float32(r.IntN(8)) // many ties
		}
		k := 1 + r.IntN(n)
		ids, vals := make([]int32, k), make([]float32, k)
		TopK(ids, vals, z)
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return z[idx[a]] > z[idx[b]] })
		for i := range k {
			if int(ids[i]) != idx[i] || vals[i] != z[idx[i]] {
				t.Fatalf("trial %d: TopK(%v, %d) = %v %v, want ids %v", trial, z, k, ids, vals, idx[:k])
			}
		}
	}
}

package avx2

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestKernel6x16(t *testing.T) {
	if !Available {
		t.Skip("CPU without AVX2/FMA")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, kk := range []int{1, 2, 7, 256} {
		a := make([]float32, kk*6)
		b := make([]float32, kk*16)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		var out [96]float32
		for i := range out {
			out[i] = 99 // must be overwritten
		}
		Kernel6x16(kk, &a[0], &b[0], &out[0])
		// The accumulating form adds 0.5× the product into a 6×16 block of
		// a 6×20 matrix whose other columns stay untouched.
		c := make([]float32, 6*20)
		for i := range c {
			c[i] = float32(i)
		}
		Kernel6x16Acc(kk, &a[0], &b[0], &c[0], 20, 0.5)
		st := make([]float32, 6*20)
		for i := range st {
			st[i] = float32(-i)
		}
		Kernel6x16Store(kk, &a[0], &b[0], &st[0], 20, 2)
		for row := 0; row < 6; row++ {
			for col := 0; col < 20; col++ {
				want := float32(-(row*20 + col))
				if col < 16 {
					want = 2 * out[row*16+col]
				}
				if d := st[row*20+col] - want; d > 1e-4 || d < -1e-4 {
					t.Fatalf("kk=%d store C[%d,%d] = %v, want %v", kk, row, col, st[row*20+col], want)
				}
			}
		}
		for row := 0; row < 6; row++ {
			for col := 0; col < 20; col++ {
				want := float32(row*20 + col)
				if col < 16 {
					want += 0.5 * out[row*16+col]
				}
				if d := c[row*20+col] - want; d > 1e-4 || d < -1e-4 {
					t.Fatalf("kk=%d acc C[%d,%d] = %v, want %v", kk, row, col, c[row*20+col], want)
				}
			}
		}
		for row := 0; row < 6; row++ {
			for c := 0; c < 16; c++ {
				var want float64
				for p := 0; p < kk; p++ {
					want += float64(a[p*6+row]) * float64(b[p*16+c])
				}
				if d := float64(out[row*16+c]) - want; d > 1e-4*float64(kk) || d < -1e-4*float64(kk) {
					t.Fatalf("kk=%d out[%d,%d] = %v, want %v", kk, row, c, out[row*16+c], want)
				}
			}
		}
	}
}

func TestDotAxpy(t *testing.T) {
	if !Available {
		t.Skip("CPU without AVX2/FMA")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{8, 16, 40, 64, 96, 264} {
		x := make([]float32, n+3)
		y := make([]float32, n+3)
		for i := range x {
			x[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		var want float64
		for i := 0; i < n; i++ {
			want += float64(x[i]) * float64(y[i])
		}
		if got := Dot(&x[0], &y[0], n); got-float32(want) > 1e-4 || got-float32(want) < -1e-4 {
			t.Fatalf("n=%d: Dot %v, want %v", n, got, want)
		}
		// Dot4 against four rows: y, x, and two shifted copies.
		rows := [4][]float32{y, x, y[1:], x[2:]}
		var out [4]float32
		Dot4(&x[0], &rows[0][0], &rows[1][0], &rows[2][0], &rows[3][0], n, &out[0])
		for r, row := range rows {
			var w float64
			for i := 0; i < n; i++ {
				w += float64(x[i]) * float64(row[i])
			}
			if d := float64(out[r]) - w; d > 1e-4 || d < -1e-4 {
				t.Fatalf("n=%d: Dot4[%d] = %v, want %v", n, r, out[r], w)
			}
		}
		// A length that is not a multiple of 8 leaves the tail alone.
		y0 := append([]float32(nil), y...)
		Axpy(0.5, &x[0], &y[0], n+3)
		for i := range y {
			want := y0[i]
			if i < n { // n+3 rounded down to a multiple of 8 is n here
				want += 0.5 * x[i]
			}
			if d := y[i] - want; d > 1e-6 || d < -1e-6 {
				t.Fatalf("n=%d: Axpy y[%d] = %v, want %v", n, i, y[i], want)
			}
		}
	}
}

func TestExpSum(t *testing.T) {
	if !Available {
		t.Skip("CPU without AVX2/FMA")
	}
	var worst float64
	for start := -87.0; start < 88; start += 0.37 {
		x := make([]float32, 35)
		for i := range x {
			x[i] = float32(start + 0.0113*float64(i))
		}
		orig := append([]float32(nil), x...)
		sum := ExpSum(&x[0], len(x), 0.25)
		var want float64
		for i := range x {
			if i >= 32 { // tail left alone
				if x[i] != orig[i] {
					t.Fatalf("tail x[%d] changed", i)
				}
				continue
			}
			e := math.Exp(float64(orig[i] - 0.25)) // the shift is subtracted in float32
			want += e
			if e < 1.2e-38 || e > 3e38 {
				continue
			}
			worst = max(worst, math.Abs(float64(x[i])-e)/e)
		}
		if math.Abs(float64(sum)-want) > 1e-6*want && want > 1e-30 && want < 1e38 {
			t.Fatalf("start %v: sum %v, want %v", start, sum, want)
		}
	}
	if worst > 3e-7 {
		t.Fatalf("ExpSum relative error %.3g", worst)
	}
	t.Logf("ExpSum max relative error %.3g", worst)
}

func TestSigmoidSiLU(t *testing.T) {
	if !Available {
		t.Skip("CPU without AVX2/FMA")
	}
	n := 8 * 200
	g := make([]float32, n+5)
	u := make([]float32, n+5)
	for i := range g {
		g[i] = float32(i-n/2) * 0.071 // −57 … 57
		u[i] = float32(i%7) - 3
	}
	sg := make([]float32, n+5)
	h := make([]float32, n+5)
	Sigmoid(&sg[0], &g[0], n+5)
	SiLUMul(&h[0], &g[0], &u[0], n+5)
	for i := range g {
		if i >= n {
			if sg[i] != 0 || h[i] != 0 {
				t.Fatalf("tail %d written", i)
			}
			continue
		}
		s := 1 / (1 + math.Exp(-float64(g[i])))
		if math.Abs(float64(sg[i])-s) > 2e-7*s+1e-30 {
			t.Fatalf("Sigmoid(%v) = %v, want %v", g[i], sg[i], s)
		}
		w := float64(g[i]) * float64(u[i]) * s
		if math.Abs(float64(h[i])-w) > 1e-6*math.Abs(w)+1e-30 {
			t.Fatalf("SiLUMul(%v, %v) = %v, want %v", g[i], u[i], h[i], w)
		}
	}
}

func TestKernel12x32(t *testing.T) {
	if !Has512 {
		t.Skip("CPU without AVX-512")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, kk := range []int{1, 3, 256} {
		a := make([]float32, kk*12)
		b := make([]float32, kk*32)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		const ldc = 35
		acc := make([]float32, 12*ldc)
		st := make([]float32, 12*ldc)
		for i := range acc {
			acc[i], st[i] = float32(i), float32(-i)
		}
		Kernel12x32Acc(kk, &a[0], &b[0], &acc[0], ldc, 0.5)
		Kernel12x32Store(kk, &a[0], &b[0], &st[0], ldc, 2)
		for row := 0; row < 12; row++ {
			for col := 0; col < ldc; col++ {
				var dot float64
				if col < 32 {
					for p := 0; p < kk; p++ {
						dot += float64(a[p*12+row]) * float64(b[p*32+col])
					}
				}
				wantAcc, wantSt := float64(row*ldc+col)+0.5*dot, 2*dot
				if col >= 32 {
					wantSt = float64(-(row*ldc + col))
				}
				if math.Abs(float64(acc[row*ldc+col])-wantAcc) > 1e-3 || math.Abs(float64(st[row*ldc+col])-wantSt) > 1e-3 {
					t.Fatalf("kk=%d C[%d,%d]: acc %v want %v, store %v want %v", kk, row, col, acc[row*ldc+col], wantAcc, st[row*ldc+col], wantSt)
				}
			}
		}
	}
}

func TestMaxScale(t *testing.T) {
	if !Available {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{8, 16, 24, 32, 40, 64, 96, 136, 1000} {
		x := make([]float32, n+5) // the tail must not be read
		for i := range x {
			x[i] = float32(r.NormFloat64()) - 10
		}
		for _, at := range []int{0, n / 2, n - 1} { // the maximum in each lane position
			y := append([]float32(nil), x...)
			y[at] = 3
			y[n+2] = 100 // in the tail: ignored
			want := float32(math.Inf(-1))
			for _, v := range y[:n] {
				want = max(want, v)
			}
			if got := Max(&y[0], n); got != want {
				t.Fatalf("Max n=%d max at %d: %v, want %v", n, at, got, want)
			}
		}
		y := append([]float32(nil), x...)
		Scale(0.25, &y[0], n)
		for i := range y {
			want := x[i]
			if i < n {
				want *= 0.25
			}
			if y[i] != want {
				t.Fatalf("Scale n=%d: y[%d] = %v, want %v", n, i, y[i], want)
			}
		}
	}
}

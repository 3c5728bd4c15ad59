package nativecal

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// Machine is the hardware entry the native coefficients are fitted for.
const Machine = "cpu-local"

// model prices rows under native coefficients.
type model struct {
	parent *architecture.Model
	hw     *hardware.GPU
}

func newModel(parent *architecture.Model) (*model, error) {
	hw, err := hardware.Lookup(Machine)
	if err != nil {
		return nil, err
	}
	return &model{parent: parent, hw: hw}, nil
}

// compiled returns the estimator of row r's workload and the summary of
// its shape.
func (m *model) compiled(r *Row) (*estimate.Compiled, *estimate.Summary, error) {
	w := workload.FixedClosed(r.ISL, r.OSL, r.Conc)
	w.NumRequests = r.Requests
	c, err := estimate.Compile(m.hw, estimate.Native, estimate.Options{}, &w, nil)
	if err != nil {
		return nil, nil, err
	}
	var s estimate.Summary
	c.Summarize(&s, r.Shape.Arch(m.parent))
	return c, &s, nil
}

// Prediction is what the estimator says of one row.
type Prediction struct {
	TTFT, TPOT, OutputTPS, PeakBytes float64
	Fits                             bool
}

func (m *model) predict(r *Row, co estimate.NativeCoeffs) (Prediction, error) {
	c, s, err := m.compiled(r)
	if err != nil {
		return Prediction{}, err
	}
	c.SetNativeCoeffs(co)
	p := c.PriceSummary(s)
	return Prediction{TTFT: p.TTFT, TPOT: p.TPOT, OutputTPS: p.OutputTokS, PeakBytes: p.TotalBytes, Fits: p.Fits}, nil
}

// Fit fits the native coefficients on the rows not held out: the time
// coefficients by non-negative least squares on the relative errors of
// TTFT, TPOT and time per output token (each linear in the coefficients),
// the memory rule by least squares on the relative error of the peak RSS
// of the rows that measured it. The sgemm rate is the median of the rows'
// measurements; threads the number the rows ran with.
func Fit(parent *architecture.Model, rows []Row, threads int) (estimate.NativeCoeffs, error) {
	m, err := newModel(parent)
	if err != nil {
		return estimate.NativeCoeffs{}, err
	}
	var fit []Row
	var rates []float64
	for _, r := range rows {
		if !r.HeldOut {
			fit = append(fit, r)
			rates = append(rates, r.SgemmFLOPS)
		}
	}
	// Each row gives three equations; fewer rows than coefficients still
	// fit (non-negativity keeps the solution bounded), as the quick sweep does.
	if len(fit) < 3 {
		return estimate.NativeCoeffs{}, fmt.Errorf("nativecal: %d fit rows, need at least 3", len(fit))
	}
	base := estimate.NativeCoeffs{SgemmFLOPS: median(rates), BandwidthBps: m.hw.BandwidthBps, Threads: max(threads, 1), MemHeap: 1, MemFile: 1}
	if !(base.SgemmFLOPS > 0) {
		return base, errors.New("nativecal: the fit rows have no sgemm rate")
	}
	// Design matrix of relative residuals: row x/y, target 1.
	var X [][estimate.NumNativeTime]float64
	for i := range fit {
		r := &fit[i]
		c, s, err := m.compiled(r)
		if err != nil {
			return base, err
		}
		var bT, bP, bW [estimate.NumNativeTime]float64
		for k := range estimate.NumNativeTime {
			var e [estimate.NumNativeTime]float64
			e[k] = 1
			c.SetNativeCoeffs(base.WithTimeVector(e))
			p := c.PriceSummary(s)
			bT[k], bP[k] = p.TTFT, p.TPOT
			if p.OutputTokS > 0 {
				bW[k] = 1 / p.OutputTokS
			}
		}
		for _, eq := range []struct {
			x [estimate.NumNativeTime]float64
			y float64
		}{{bT, r.TTFT}, {bP, r.TPOT}, {bW, 1 / r.OutputTPS}} {
			if !(eq.y > 0) || math.IsInf(eq.y, 0) {
				continue
			}
			var row [estimate.NumNativeTime]float64
			for k := range row {
				row[k] = eq.x[k] / eq.y
			}
			X = append(X, row)
		}
	}
	beta := nnls(X)
	co := base.WithTimeVector(beta)
	if err := fitMemory(m, fit, &co); err != nil {
		return co, err
	}
	co.Rows = len(fit)
	return co, nil
}

// nnls minimises Σ_i (X_i·β − 1)² over β ≥ 0 by cyclic coordinate descent
// on the normal equations, with the columns scaled to unit norm (the
// coefficients span twelve orders of magnitude). It is deterministic.
func nnls(X [][estimate.NumNativeTime]float64) [estimate.NumNativeTime]float64 {
	const K = estimate.NumNativeTime
	var scale [K]float64
	for _, row := range X {
		for k, v := range row {
			scale[k] += v * v
		}
	}
	for k := range scale {
		scale[k] = math.Sqrt(scale[k])
	}
	var A [K][K]float64
	var b [K]float64
	for _, row := range X {
		for j := range K {
			if scale[j] == 0 {
				continue
			}
			xj := row[j] / scale[j]
			b[j] += xj
			for k := range K {
				if scale[k] > 0 {
					A[j][k] += xj * row[k] / scale[k]
				}
			}
		}
	}
	var beta [K]float64
	for range 200000 {
		change := 0.0
		for j := range K {
			if A[j][j] <= 0 {
				continue
			}
			g := b[j]
			for k := range K {
				g -= A[j][k] * beta[k]
			}
			nb := max(beta[j]+g/A[j][j], 0)
			change = max(change, math.Abs(nb-beta[j]))
			beta[j] = nb
		}
		if change < 1e-13 {
			break
		}
	}
	for k := range beta {
		if scale[k] > 0 {
			beta[k] /= scale[k]
		} else {
			beta[k] = 0
		}
	}
	return beta
}

// fitMemory fits MemFixed and MemHeap by weighted least squares on the
// relative error of the measured peak RSS, for each MemFile on a grid of
// 0 to 4 in steps of 0.05, and keeps the best.
func fitMemory(m *model, rows []Row, co *estimate.NativeCoeffs) error {
	type pt struct{ w, file, kvact, y float64 }
	var pts []pt
	for i := range rows {
		r := &rows[i]
		if r.PeakRSSBytes <= 0 {
			continue
		}
		c, s, err := m.compiled(r)
		if err != nil {
			return err
		}
		parts := *co
		parts.MemFixed, parts.MemHeap, parts.MemFile = 0, 1, 0
		c.SetNativeCoeffs(parts)
		rep, _ := c.Memory(s)
		pts = append(pts, pt{w: rep.WeightsBytes, file: s.TotalParams * estimate.NativeCheckpointBytes, kvact: rep.KVPoolBytes + rep.ActivationBytes, y: float64(r.PeakRSSBytes)})
	}
	if len(pts) < 3 {
		return nil // keep the prior memory terms
	}
	best := math.Inf(1)
	for g := 0; g <= 80; g++ {
		f := 0.05 * float64(g)
		// minimise Σ ((a + h·z − y)/y)²: normal equations in (a, h).
		var s11, s12, s22, t1, t2 float64
		for _, p := range pts {
			z := p.w + math.Max(f*p.file, p.kvact)
			u, v := 1/p.y, z/p.y
			s11 += u * u
			s12 += u * v
			s22 += v * v
			t1 += u
			t2 += v
		}
		det := s11*s22 - s12*s12
		if det == 0 {
			continue
		}
		a := (t1*s22 - t2*s12) / det
		h := (s11*t2 - s12*t1) / det
		if a < 0 || h < 0 {
			continue
		}
		sse := 0.0
		for _, p := range pts {
			z := p.w + math.Max(f*p.file, p.kvact)
			e := (a + h*z - p.y) / p.y
			sse += e * e
		}
		if sse < best {
			best = sse
			co.MemFixed, co.MemHeap, co.MemFile = a, h, f
		}
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

package nativecal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

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
	// The coefficients are replaced before every pricing (SetNativeCoeffs);
	// compiling with given ones reads no coefficient file, so a
	// calibration does not need the file it is about to write.
	c, err := estimate.CompileNative(m.hw, estimate.Options{}, &w, estimate.DefaultNativeCoeffs().Machines[Machine])
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
	base := estimate.NativeCoeffs{SgemmFLOPS: median(rates), BandwidthBps: m.hw.BandwidthBps, Threads: max(threads, 1), MemHeap: 1, MemBuffers: 1}
	if !(base.SgemmFLOPS > 0) {
		return base, errors.New("nativecal: the fit rows have no sgemm rate")
	}
	// The effective cache is not linear in the rows: fit the time
	// coefficients at each candidate size (and without a split) and keep
	// the size whose fit explains the rows best.
	best, bestSS := base, math.Inf(1)
	var bestBeta []float64
	for _, cb := range cacheCandidates() {
		try := base
		try.CacheBytes = cb
		X, err := design(m, fit, try)
		if err != nil {
			return base, err
		}
		beta := nnls(X)
		if ss := sumSquares(X, beta); ss < bestSS {
			best, bestSS, bestBeta = try, ss, beta
		}
	}
	base = best
	var beta [estimate.NumNativeTime]float64
	copy(beta[:], bestBeta)
	co := base.WithTimeVector(beta)
	if err := fitMemory(m, fit, &co); err != nil {
		return co, err
	}
	co.Rows = len(fit)
	return co, nil
}

// cacheCandidates are the effective cache sizes Fit tries: none (0), then
// 1 to 32 MiB in steps of 0.5 MiB, in the bytes the weights are stored in
// (the bf16 weights of the sweep's small shapes span 2 to 12 MiB, its
// large model's 135 MB; the last-level caches of the hosts here are 32
// MiB or more, shared).
func cacheCandidates() []float64 {
	c := []float64{0}
	for mib := 1.0; mib <= 32; mib += 0.5 {
		c = append(c, mib*(1<<20))
	}
	return c
}

// design is the design matrix of the time fit under base's cache size:
// per row three equations (TTFT, TPOT, time per output token), each the
// basis terms divided by the measured value, so that the target is 1.
func design(m *model, fit []Row, base estimate.NativeCoeffs) ([][]float64, error) {
	var X [][]float64
	for i := range fit {
		r := &fit[i]
		c, s, err := m.compiled(r)
		if err != nil {
			return nil, err
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
			row := make([]float64, estimate.NumNativeTime)
			for k := range row {
				row[k] = eq.x[k] / eq.y
			}
			X = append(X, row)
		}
	}
	return X, nil
}

// sumSquares is Σ_i (X_i·β − 1)², the objective nnls minimises.
func sumSquares(X [][]float64, beta []float64) float64 {
	ss := 0.0
	for _, row := range X {
		d := -1.0
		for k, v := range row {
			d += v * beta[k]
		}
		ss += d * d
	}
	return ss
}

// nnls minimises Σ_i (X_i·β − 1)² over β ≥ 0 by cyclic coordinate descent
// on the normal equations, with the columns scaled to unit norm (the
// coefficients span twelve orders of magnitude). It is deterministic.
func nnls(X [][]float64) []float64 {
	if len(X) == 0 {
		return nil
	}
	K := len(X[0])
	scale := make([]float64, K)
	for _, row := range X {
		for k, v := range row {
			scale[k] += v * v
		}
	}
	for k := range scale {
		scale[k] = math.Sqrt(scale[k])
	}
	A := make([][]float64, K)
	for j := range A {
		A[j] = make([]float64, K)
	}
	b := make([]float64, K)
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
	beta := make([]float64, K)
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

// fitMemory fits the memory rule by non-negative least squares on the
// relative error of the measured peak RSS less the weights (resident byte
// for byte at their stored width: MemHeap is 1, not fitted): a fixed cost,
// the KV cache and step buffers, and the garbage term.
func fitMemory(m *model, rows []Row, co *estimate.NativeCoeffs) error {
	var X [][]float64
	for i := range rows {
		r := &rows[i]
		if r.PeakRSSBytes <= 0 {
			continue
		}
		c, s, err := m.compiled(r)
		if err != nil {
			return err
		}
		y := float64(r.PeakRSSBytes)
		parts := *co
		parts.MemFixed, parts.MemHeap, parts.MemBuffers, parts.MemGarbage = 0, 1, 1, 1
		c.SetNativeCoeffs(parts)
		rep, _ := c.Memory(s)
		// The weights are resident byte for byte (MemHeap 1): the rest of
		// the peak is fitted, relative to that rest.
		rest := y - rep.WeightsBytes
		if rest <= 0 {
			continue
		}
		X = append(X, []float64{1 / rest, (rep.KVPoolBytes + rep.ActivationBytes) / rest, rep.OverheadBytes / rest})
	}
	if len(X) < 3 {
		return nil // keep the prior memory terms
	}
	b := nnls(X)
	co.MemFixed, co.MemHeap, co.MemBuffers, co.MemGarbage = b[0], 1, b[1], b[2]
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

// Calibration is the result of Calibrate: the rows as written (CSV, with
// their provenance), the provenance and rows read back from it, the
// coefficients fitted on them with the held-out errors and the rows' host
// and window filled in, and the report.
type Calibration struct {
	CSV        []byte
	Provenance Provenance
	Rows       []Row
	Coeffs     estimate.NativeCoeffs
	Report     *Report
}

// File returns the coefficient file of the calibration, with JSON's
// indentation and a final newline. Everything in it comes from the rows
// (their provenance included), so a refit of the same rows gives the same
// bytes on any machine.
func (c *Calibration) File() ([]byte, error) {
	p := c.Provenance
	measured := p.Window()
	if p.Note != "" {
		measured = strings.TrimPrefix(measured+"; "+p.Note, "; ")
	}
	f := estimate.NativeCoeffFile{
		Comment:  "Fitted by autocompress calibrate-native on bench-serve measurements of the host named below (estimate/nativecal): the held-out errors are that host's. Report: autocompress validate-native.",
		Command:  "autocompress calibrate-native --rows-out estimate/nativecal/sweep.csv --out estimate/native_coefficients.json --force",
		Host:     p.Hostname,
		Measured: measured,
		Load:     p.Load,
		Machines: map[string]estimate.NativeCoeffs{Machine: c.Coeffs},
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("nativecal: %w", err)
	}
	return append(b, '\n'), nil
}

// Calibrate is the one fit path of calibrate-native, measured or from
// rows: it writes rows as CSV (rounded as WriteRows rounds), reads them
// back, fits on exactly what was read and validates that fit. A sweep just
// measured and its CSV refitted later (--from-rows) therefore give the
// same coefficients to the last bit.
func Calibrate(parent *architecture.Model, prov Provenance, rows []Row, threads int) (*Calibration, error) {
	var buf bytes.Buffer
	if err := WriteSweep(&buf, prov, rows); err != nil {
		return nil, err
	}
	prov, read, err := ReadSweep(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("nativecal: reading back the rows written: %w", err)
	}
	co, err := Fit(parent, read, threads)
	if err != nil {
		return nil, err
	}
	rep, err := Validate(parent, read, co)
	if err != nil {
		return nil, err
	}
	co.ErrTTFT, co.ErrTPOT, co.ErrThroughput, co.ErrMemory = rep.HeldOut.TTFT, rep.HeldOut.TPOT, rep.HeldOut.Throughput, rep.HeldOut.Memory
	for _, v := range []*float64{&co.ErrTTFT, &co.ErrTPOT, &co.ErrThroughput, &co.ErrMemory} {
		*v = max(*v, 0) // −1: no rows for the metric
	}
	co.Source = fmt.Sprintf("nativecal sweep: %d fitted rows, %d held out", rep.Fit.Rows, rep.HeldOut.Rows)
	if !prov.Host.Zero() {
		h := prov.Host
		co.Host = &h
	}
	co.Measured = prov.Window()
	rep.Provenance = prov
	return &Calibration{CSV: buf.Bytes(), Provenance: prov, Rows: read, Coeffs: co, Report: rep}, nil
}

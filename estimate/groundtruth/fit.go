package groundtruth

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// Metric names a measured quantity.
type Metric string

// Metrics.
const (
	TTFT       Metric = "ttft"
	TPOT       Metric = "tpot"
	Throughput Metric = "throughput"
)

// Metrics lists the metrics in report order.
var Metrics = []Metric{TPOT, TTFT, Throughput}

// Prepared is a row bound to its compiled estimator, ready to predict under
// any coefficients.
type Prepared struct {
	Row    *Row
	Family string
	Group  string // canonical model id, for leave-one-model-out
	c      *estimate.Compiled
	s      estimate.Summary
}

// Prepare compiles each row; rows that cannot be priced (the deployment does
// not fit, unknown GPU, ...) are skipped and counted.
func Prepare(rows []Row, skipped Skipped) []*Prepared {
	var out []*Prepared
	for i := range rows {
		r := &rows[i]
		hw, err := hardware.Lookup(r.GPU)
		if err != nil {
			skipped.add("unknown GPU")
			continue
		}
		m, ok := r.Arch, r.Arch != nil
		if !ok {
			m, ok = published.Describe(r.Model)
		}
		if !ok {
			skipped.add("model not described")
			continue
		}
		o := estimate.Options{Precision: r.Precision, KVDType: r.KVDType, TP: r.TP}
		var w workload.Workload
		if r.Static() {
			w = workload.Workload{Input: workload.FixedLength(r.ISL), Output: workload.FixedLength(r.OSL), Rate: math.Inf(1), NumRequests: r.Batch}
			o.MaxNumSeqs = max(r.Batch, 1)
			if r.Engine == estimate.LlamaCPP {
				o.MaxNumSeqs = 1
			}
		} else {
			w = workload.FixedClosed(r.ISL, r.OSL, r.Concurrency)
		}
		c, err := estimate.Compile(hw, r.Engine, o, &w, nil)
		if err != nil {
			skipped.add("cannot compile: " + firstWords(err.Error(), 6))
			continue
		}
		fam := r.Engine.Family(hw)
		if r.Era != "" && !strings.Contains(fam, "@") {
			fam += "@" + r.Era
		}
		p := &Prepared{Row: r, Family: fam, Group: published.Canonical(r.Model), c: c}
		c.Summarize(&p.s, m)
		if _, ok := c.Memory(&p.s); !ok {
			skipped.add("does not fit in memory per the estimator")
			continue
		}
		out = append(out, p)
	}
	return out
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

// Predict returns the predicted value of metric for p under co, and whether
// the row measured it.
func (p *Prepared) Predict(co estimate.Coeffs, metric Metric) (pred, meas float64, ok bool) {
	all := p.PredictAll(co)
	for i, m := range Metrics {
		if m == metric {
			return all[i].Pred, all[i].Meas, all[i].OK
		}
	}
	return 0, 0, false
}

// Prediction is one metric of a row: predicted and measured values, and
// whether the row measured it.
type Prediction struct {
	Pred, Meas float64
	OK         bool
}

// PredictAll returns the predictions of every metric, in Metrics order,
// from one evaluation of the estimator.
func (p *Prepared) PredictAll(co estimate.Coeffs) [3]Prediction {
	var out [3]Prediction // TPOT, TTFT, Throughput
	r := p.Row
	p.c.SetCoeffs(co)
	if r.Static() {
		ttft, total := p.c.StaticBatch(&p.s, r.Batch, r.ISL, r.OSL, r.Budget)
		if r.TTFTms > 0 {
			out[1] = Prediction{ttft * 1000, r.TTFTms, true}
		}
		if r.LatencyS > 0 {
			out[2] = Prediction{float64(r.Batch*r.OSL) / total, r.OutputTokS, true}
		}
		return out
	}
	pr := p.c.PriceSummary(&p.s)
	if r.TPOTms > 0 {
		out[0] = Prediction{pr.TPOT * 1000, r.TPOTms, true}
	}
	if r.TTFTms > 0 {
		out[1] = Prediction{pr.TTFT * 1000, r.TTFTms, true}
	}
	if r.OutputTokS > 0 {
		out[2] = Prediction{pr.OutputTokS, r.OutputTokS, true}
	}
	return out
}

// fitted marks the coefficients the optimiser moves (others keep their prior).
var fitted = map[string][]int{
	// indices into estimate.CoeffNames; state (3) is not fitted: no row has
	// a recurrent state
	"default": {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18},
	// Argonne's llama.cpp prompts run in chunks of 1–64 tokens (n_batch), so
	// they say nothing about prefill FLOP efficiency at serving chunk sizes:
	// comp keeps its prior there.
	"llamacpp-cuda@2024": {1, 2, 6, 7, 10, 13},
	"vllm@2024":          {0, 1, 2, 4, 6, 7, 8, 10, 13},
	// SGLang has ~150 rows on two GPUs: fit fewer coefficients, but its
	// closed-loop clients run close to lock-step (TTFT grows with the whole
	// group's prefill), so the burst coefficient is fitted.
	// SGLang has ~300 rows on two GPUs and three models, too few for the
	// whole set: it starts from vLLM's fit (parentFamily; both are PyTorch
	// engines on the same FlashInfer/Triton/CUTLASS kernels) and fits its
	// own weight efficiency, scheduler (per-step) cost, request overhead,
	// queueing and lock-step burst.
	"sglang":      {1, 7, 10, 11, 14},
	"trtllm@2024": {0, 1, 2, 4, 6, 7, 8, 9, 10, 13},
}

// parentFamily names the family whose fit a data-poor family starts from.
// The parent is fitted on the same hold-out split, so no held-out GPU or
// model reaches the child through it.
var parentFamily = map[string]string{"sglang": "vllm"}

// startFor returns the starting coefficients of fam: its parent's fit on
// the rows keep accepts when it has a parent with such rows, else its prior.
func startFor(ctx context.Context, rows []*Prepared, fam string, prior *estimate.CoeffFile, maxIter int, keep func(*Prepared) bool) estimate.Coeffs {
	pc := priorFor(prior, fam)
	parent, ok := parentFamily[fam]
	if !ok {
		return pc
	}
	sub := filter(rows, func(p *Prepared) bool { return p.Family == parent && keep(p) })
	if len(sub) == 0 {
		return pc
	}
	co, _ := Fit(ctx, sub, parent, priorFor(prior, parent), maxIter)
	co.Quant = pc.Quant
	return co
}

// metricWeight balances the loss: TTFT is noisier (queueing, client time).
var metricWeight = map[Metric]float64{TPOT: 1, TTFT: 0.25, Throughput: 1}

// huberDelta is the log-error scale where the loss turns from quadratic to linear.
const huberDelta = 0.1

// fittedPairs calls fn, in a fixed order, for every (row, metric) pair the
// fit scores, with the metric's loss weight and the log error
// log(pred/meas); finite is false when the prediction is not a positive
// finite number (logErr is then 0).
func fittedPairs(rows []*Prepared, co estimate.Coeffs, fn func(weight, logErr float64, finite bool)) {
	for _, p := range rows {
		all := p.PredictAll(co)
		for i, m := range Metrics {
			if m == Throughput && p.Row.Source == "aic" {
				continue // derived from TTFT and TPOT; not an independent measurement
			}
			if !all[i].OK {
				continue
			}
			if pred := all[i].Pred; !(pred > 0) || math.IsInf(pred, 0) {
				fn(metricWeight[m], 0, false)
			} else {
				fn(metricWeight[m], math.Log(pred/all[i].Meas), true)
			}
		}
	}
}

// lossSum accumulates the loss: pseudo-Huber on the log error, quadratic
// near zero and linear in the tails, so a few rows far past KV capacity or
// with odd client timing do not dominate (the targets are medians); a
// prediction that is not finite costs a constant.
type lossSum struct{ s, n float64 }

func (l *lossSum) add(weight, logErr float64, finite bool) {
	l.n += weight
	if !finite {
		l.s += 25 * weight
		return
	}
	d := logErr / huberDelta
	l.s += weight * huberDelta * huberDelta * (math.Sqrt(1+d*d) - 1)
}

func (l *lossSum) value() float64 {
	if l.n == 0 {
		return 0
	}
	return l.s / l.n
}

// loss is the weighted mean pseudo-Huber log error over rows and metrics.
func loss(rows []*Prepared, co estimate.Coeffs) float64 {
	var l lossSum
	fittedPairs(rows, co, l.add)
	return l.value()
}

// Fit fits the coefficients of one family on rows, starting from prior,
// with Nelder–Mead on the logarithms of the fitted coefficients
// (deterministic: fixed initial simplex, fixed iteration cap).
func Fit(ctx context.Context, rows []*Prepared, family string, prior estimate.Coeffs, maxIter int) (estimate.Coeffs, float64) {
	idx, ok := fitted[family]
	if !ok {
		idx = fitted["default"]
	}
	idx = identifiable(rows, prior, idx)
	base := prior.Vector()
	x0 := make([]float64, len(idx))
	for i, k := range idx {
		x0[i] = math.Log(math.Max(base[k], 1e-9))
	}
	toCoeffs := func(x []float64) estimate.Coeffs {
		v := base
		for i, k := range idx {
			// Bound each coefficient to a physically sensible range.
			v[k] = math.Exp(clamp(x[i], x0[i]-6, x0[i]+6))
		}
		if v[0] < 1 {
			v[0] = 1 // cannot beat peak FLOPS
		}
		if v[1] < 1 {
			v[1] = 1 // cannot beat peak bandwidth
		}
		if v[2] < 1 {
			v[2] = 1
		}
		if v[12] < 1 {
			v[12] = 1 // FP8/FP4 GEMMs are never more efficient than BF16 ones
		}
		v[5] = clamp(v[5], 2e-6, 5e-5)  // an all-reduce's latency floor: NCCL on NVLink/PCIe, 2–50 µs
		v[10] = clamp(v[10], 1e-3, 0.2) // per-request overhead: ms to a fifth of a second
		v[11] = clamp(v[11], 0.1, 10)   // queueing scale stays near the M/D/1 value
		v[14] = clamp(v[14], 0, 1)      // between staggered and lock-step clients
		v[15] = clamp(v[15], 1, 4)      // block-scaled FP8 is never faster than per-tensor FP8
		v[16] = clamp(v[16], 1, 4)      // weight-only kernels are never faster than native ones
		v[17] = clamp(v[17], 0, 4)      // a few decode steps at most
		v[18] = clamp(v[18], 0, 2e-5)
		return prior.WithVector(v)
	}
	f := func(x []float64) float64 {
		if ctx.Err() != nil {
			return math.Inf(1)
		}
		return loss(rows, toCoeffs(x))
	}
	// Restarted Nelder–Mead: each restart rebuilds the simplex around the best
	// point, which escapes the premature collapse NM suffers in ~10 dimensions.
	// Small families get more iterations (their loss is cheap to evaluate).
	iter := maxIter
	if len(rows) < 400 {
		iter = maxIter * 3
	}
	x, fx := x0, math.Inf(1)
	for _, step := range []float64{1, 0.5, 0.25, 0.1} {
		x, fx = nelderMead(f, x, step, iter/4+1)
	}
	// Nelder–Mead finds the basin; a damped Gauss–Newton polish on the
	// same loss then converges inside it, which the simplex does slowly.
	// The polish works on the projected point: a coordinate the simplex
	// left beyond a bound sits where the clamp makes the loss flat, and its
	// derivative would read zero.
	project := func(x []float64) {
		v := toCoeffs(x).Vector()
		for i, k := range idx {
			x[i] = math.Log(max(v[k], 1e-300))
		}
	}
	project(x)
	x, fx = lmPolish(ctx, rows, toCoeffs, project, x, fx, lmIterations)
	return toCoeffs(x), fx
}

// lmIterations caps the Levenberg–Marquardt polish of Fit.
const lmIterations = 40

// residuals fills e with the log errors of every fitted (row, metric) pair
// in fittedPairs' order, and w with their loss weights (0 where the
// prediction is not finite: the loss charges those a constant, so they
// carry no gradient), and returns the loss at co as well.
func residuals(rows []*Prepared, co estimate.Coeffs, e, w []float64) ([]float64, []float64, float64) {
	e, w = e[:0], w[:0]
	var l lossSum
	fittedPairs(rows, co, func(weight, logErr float64, finite bool) {
		l.add(weight, logErr, finite)
		if !finite {
			weight = 0
		}
		e, w = append(e, logErr), append(w, weight)
	})
	return e, w, l.value()
}

// lmPolish minimises loss(rows, toCoeffs(x)) from x by Levenberg–Marquardt
// (project maps a point onto the coefficients' bounds)
// on the pseudo-Huber loss (iteratively reweighted: each residual weighs
// w/√(1+(e/δ)²)), with a forward-difference Jacobian. It only accepts steps
// that lower the loss, so it never returns a worse point than it was given.
func lmPolish(ctx context.Context, rows []*Prepared, toCoeffs func([]float64) estimate.Coeffs, project func([]float64), x []float64, fx float64, iters int) ([]float64, float64) {
	k := len(x)
	if k == 0 {
		return x, fx
	}
	const h = 1e-4
	x = append([]float64(nil), x...)
	var e0, w0, ej, wj []float64
	e0, w0, _ = residuals(rows, toCoeffs(x), e0, w0)
	n := len(e0)
	J := make([]float64, n*k)
	A := make([]float64, k*k)
	g := make([]float64, k)
	lambda := 1e-2
	xt := make([]float64, k)
	for it := 0; it < iters && ctx.Err() == nil; it++ {
		for j := 0; j < k; j++ {
			copy(xt, x)
			xt[j] += h
			ej, wj, _ = residuals(rows, toCoeffs(xt), ej, wj)
			for i := 0; i < n; i++ {
				d := 0.0
				if w0[i] > 0 && wj[i] > 0 {
					d = (ej[i] - e0[i]) / h
				}
				J[i*k+j] = d
			}
		}
		clear(A)
		clear(g)
		for i := 0; i < n; i++ {
			if w0[i] == 0 {
				continue
			}
			r := e0[i] / huberDelta
			om := w0[i] / math.Sqrt(1+r*r)
			row := J[i*k : (i+1)*k]
			for a := 0; a < k; a++ {
				if row[a] == 0 {
					continue
				}
				g[a] += om * row[a] * e0[i]
				for b := 0; b < k; b++ {
					A[a*k+b] += om * row[a] * row[b]
				}
			}
		}
		improved := false
		for lambda < 1e8 {
			M := append([]float64(nil), A...)
			rhs := make([]float64, k)
			for a := 0; a < k; a++ {
				M[a*k+a] += lambda*A[a*k+a] + 1e-12
				rhs[a] = -g[a]
			}
			step, ok := solve(M, rhs, k)
			if !ok {
				lambda *= 10
				continue
			}
			for a := range xt {
				xt[a] = x[a] + step[a]
			}
			project(xt)
			// The trial point's residuals serve the next Jacobian if it is kept.
			var ft float64
			ej, wj, ft = residuals(rows, toCoeffs(xt), ej, wj)
			if ft < fx {
				copy(x, xt)
				fx = ft
				e0, ej = ej, e0
				w0, wj = wj, w0
				lambda = math.Max(lambda/3, 1e-7)
				improved = true
				break
			}
			lambda *= 4
		}
		if !improved {
			break
		}
	}
	return x, fx
}

// solve solves the k×k system M·x = b by Gaussian elimination with partial
// pivoting; ok is false when M is singular.
func solve(M, b []float64, k int) ([]float64, bool) {
	for c := 0; c < k; c++ {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(M[r*k+c]) > math.Abs(M[p*k+c]) {
				p = r
			}
		}
		if M[p*k+c] == 0 {
			return nil, false
		}
		if p != c {
			for j := 0; j < k; j++ {
				M[c*k+j], M[p*k+j] = M[p*k+j], M[c*k+j]
			}
			b[c], b[p] = b[p], b[c]
		}
		for r := c + 1; r < k; r++ {
			f := M[r*k+c] / M[c*k+c]
			if f == 0 {
				continue
			}
			for j := c; j < k; j++ {
				M[r*k+j] -= f * M[c*k+j]
			}
			b[r] -= f * b[c]
		}
	}
	x := make([]float64, k)
	for r := k - 1; r >= 0; r-- {
		s := b[r]
		for j := r + 1; j < k; j++ {
			s -= M[r*k+j] * x[j]
		}
		x[r] = s / M[r*k+r]
	}
	return x, true
}

// identifiable drops from idx the coefficients that no row's prediction
// depends on (the block-FP8 factor when no row is block-scaled, the MoE
// overhead when no model has experts, …): the loss is flat along them, and
// Nelder–Mead would let them drift to their bounds instead of keeping the
// prior, which is all a held-out row of that kind then has to go on.
func identifiable(rows []*Prepared, prior estimate.Coeffs, idx []int) []int {
	base := prior.Vector()
	l0 := loss(rows, prior)
	var out []int
	for _, k := range idx {
		v := base
		v[k] = math.Max(v[k], 1e-9) * 1.5
		if loss(rows, prior.WithVector(v)) != l0 {
			out = append(out, k)
		}
	}
	return out
}

// priorFor returns the starting coefficients of a family ("vllm@2024"
// starts from "vllm"), with a small non-zero MoE term so that its logarithm
// can move.
func priorFor(prior *estimate.CoeffFile, fam string) estimate.Coeffs {
	pc, _ := prior.Family(fam)
	if _, ok := prior.Families[fam]; !ok {
		base, _, _ := strings.Cut(fam, "@")
		pc, _ = prior.Family(base)
	}
	if pc.MoE <= 0 {
		pc.MoE = 1e-5
	}
	return pc
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// nelderMead minimises f from x0 with an initial simplex of step s.
func nelderMead(f func([]float64) float64, x0 []float64, step float64, maxIter int) ([]float64, float64) {
	n := len(x0)
	pts := make([][]float64, n+1)
	vals := make([]float64, n+1)
	for i := range pts {
		pts[i] = append([]float64(nil), x0...)
		if i > 0 {
			pts[i][i-1] += step
		}
		vals[i] = f(pts[i])
	}
	cen := make([]float64, n)
	try := func(a float64, worst []float64) []float64 {
		x := make([]float64, n)
		for j := range x {
			x[j] = cen[j] + a*(worst[j]-cen[j])
		}
		return x
	}
	for it := 0; it < maxIter; it++ {
		// order
		ord := make([]int, n+1)
		for i := range ord {
			ord[i] = i
		}
		sort.SliceStable(ord, func(a, b int) bool { return vals[ord[a]] < vals[ord[b]] })
		np, nv := make([][]float64, n+1), make([]float64, n+1)
		for i, o := range ord {
			np[i], nv[i] = pts[o], vals[o]
		}
		pts, vals = np, nv
		if math.Abs(vals[n]-vals[0]) < 1e-10*(1+math.Abs(vals[0])) && it > 50 {
			break
		}
		for j := range cen {
			cen[j] = 0
			for i := 0; i < n; i++ {
				cen[j] += pts[i][j] / float64(n)
			}
		}
		xr := try(-1, pts[n])
		fr := f(xr)
		switch {
		case fr < vals[0]:
			xe := try(-2, pts[n])
			if fe := f(xe); fe < fr {
				pts[n], vals[n] = xe, fe
			} else {
				pts[n], vals[n] = xr, fr
			}
		case fr < vals[n-1]:
			pts[n], vals[n] = xr, fr
		default:
			xc := try(0.5, pts[n])
			if fc := f(xc); fc < vals[n] {
				pts[n], vals[n] = xc, fc
			} else {
				for i := 1; i <= n; i++ {
					for j := range pts[i] {
						pts[i][j] = pts[0][j] + 0.5*(pts[i][j]-pts[0][j])
					}
					vals[i] = f(pts[i])
				}
			}
		}
	}
	best := 0
	for i := range vals {
		if vals[i] < vals[best] {
			best = i
		}
	}
	return pts[best], vals[best]
}

// Families returns the coefficient families present in rows, sorted.
func Families(rows []*Prepared) []string {
	set := map[string]bool{}
	for _, p := range rows {
		set[p.Family] = true
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func filter(rows []*Prepared, keep func(*Prepared) bool) []*Prepared {
	var out []*Prepared
	for _, p := range rows {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// FitAll fits every family present in rows and returns the coefficient file.
func FitAll(ctx context.Context, rows []*Prepared, prior *estimate.CoeffFile, maxIter int) (*estimate.CoeffFile, error) {
	out := &estimate.CoeffFile{
		Comment:  "Fitted by autocompress calibrate on the public ground truth (AIConfigurator silicon sample, Argonne LLM-Inference-Bench); deterministic Nelder-Mead on log-coefficients. Held-out errors: autocompress validate-estimator.",
		Command:  "autocompress calibrate --out estimate/coefficients.json",
		Families: map[string]estimate.Coeffs{},
	}
	for k, v := range prior.Families {
		out.Families[k] = v
	}
	for _, fam := range Families(rows) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sub := filter(rows, func(p *Prepared) bool { return p.Family == fam })
		pc := startFor(ctx, rows, fam, prior, maxIter, func(*Prepared) bool { return true })
		co, _ := Fit(ctx, sub, fam, pc, maxIter)
		vers := map[string]bool{}
		for _, p := range sub {
			if v := p.Row.EngineVersion; v != "" {
				vers[v] = true
			}
		}
		var vl []string
		for v := range vers {
			vl = append(vl, v)
		}
		sort.Strings(vl)
		if len(vl) > 8 {
			vl = append(vl[:8], fmt.Sprintf("… (%d versions)", len(vers)))
		}
		co.EngineVersion = strings.Join(vl, ", ")
		co.Rows = len(sub)
		co.Source = sourcesOf(sub)
		co.GPUs, co.Measured = whereWhen(sub)
		out.Families[fam] = co
	}
	if err := fitLlamaBenchInto(out, prior, maxIter); err != nil {
		return nil, err
	}
	// A family fitted only on old builds also serves as the current one when
	// the priors do not describe the current builds. (llama.cpp's current
	// CUDA and Metal builds have their own priors from costmodel.md §5.4:
	// Argonne's 2024 datacenter fit describes only its own GPU class.)
	for fam, co := range out.Families {
		base, era, ok := strings.Cut(fam, "@")
		if !ok || era == "" {
			continue
		}
		if _, has := out.Families[base]; !has {
			out.Families[base] = co
		}
	}
	return out, nil
}

// fitLlamaBenchInto sets the prompt-GEMM terms (GEMM, CompLow) of the
// llama.cpp GeForce and Apple families from the embedded llama-bench rows
// where no measurement row fitted them, with the held-out (leave-one-GPU-
// out) prompt-processing and decode medians as the family's TTFT and TPOT
// error bands.
func fitLlamaBenchInto(out *estimate.CoeffFile, prior *estimate.CoeffFile, maxIter int) error {
	rows, err := LlamaBenchTables()
	if err != nil {
		return err
	}
	fits, err := FitLlamaBench(rows, prior, maxIter)
	if err != nil {
		return err
	}
	_, cells, err := ValidateLlamaBench(rows, prior, maxIter)
	if err != nil {
		return err
	}
	for _, fam := range LlamaBenchFamilies {
		co, ok := out.Families[fam]
		fit, fitted := fits[fam]
		if !ok || !fitted || co.GEMM > 0 {
			continue
		}
		co.GEMM, co.CompLow = fit.GEMM, fit.CompLow
		n := 0
		for i := range rows {
			if rows[i].Fitted() && estimate.LlamaCPP.Family(mustGPU(rows[i].GPU)) == fam {
				n++
			}
		}
		co.Rows = n
		gpus := map[string]bool{}
		for i := range rows {
			if estimate.LlamaCPP.Family(mustGPU(rows[i].GPU)) == fam {
				gpus[rows[i].GPU] = true
			}
		}
		co.GPUs = sortedSet(gpus)
		co.Measured = "2024-05" // the source's "snapshots in May 2024" (testdata/llama_bench.md)
		co.EngineVersion = "llama.cpp builds of May 2024 (llama-bench)"
		co.Source += fmt.Sprintf("; gemm and comp_low fitted on %d llama-bench prompt rows (estimate/groundtruth/testdata/llama_bench.md)", n)
		if c, err := LlamaBenchCellFor(cells, fam, BenchPP, "held-out"); err == nil {
			co.ErrTTFT = c.Median
		}
		if c, err := LlamaBenchCellFor(cells, fam, BenchTG, "held-out"); err == nil {
			co.ErrTPOT = c.Median
		}
		out.Families[fam] = co
	}
	return nil
}

// mustGPU looks up a GPU the curated tables name (prepareBench has checked it).
func mustGPU(name string) *hardware.GPU {
	hw, err := hardware.Lookup(name)
	if err != nil {
		return &hardware.GPU{}
	}
	return hw
}

// Measured is where and when one family's rows were measured.
type Measured struct {
	Family string   `json:"family"`
	GPUs   []string `json:"gpus"`
	When   string   `json:"measured"`
}

// WhereMeasured returns, per family of rows (in Families order), the GPUs
// its rows were measured on and the range of their dates: what a held-out
// error of that family is about.
func WhereMeasured(rows []*Prepared) []Measured {
	var out []Measured
	for _, fam := range Families(rows) {
		g, w := whereWhen(filter(rows, func(p *Prepared) bool { return p.Family == fam }))
		out = append(out, Measured{Family: fam, GPUs: g, When: w})
	}
	return out
}

// whereWhen returns the GPUs (catalog names, sorted) the rows were
// measured on and the range of their dates ("2025-10-29 to 2026-04-21",
// one date when all agree, "" when none is dated; undated rows counted).
func whereWhen(rows []*Prepared) (gpus []string, measured string) {
	set := map[string]bool{}
	lo, hi, undated := "", "", 0
	for _, p := range rows {
		set[p.Row.GPU] = true
		d := p.Row.Measured
		if d == "" {
			undated++
			continue
		}
		if lo == "" || d < lo {
			lo = d
		}
		if d > hi {
			hi = d
		}
	}
	switch {
	case lo == "":
	case lo == hi:
		measured = lo
	default:
		measured = lo + " to " + hi
	}
	if undated > 0 && measured != "" {
		measured += fmt.Sprintf(" (%d rows undated)", undated)
	}
	return sortedSet(set), measured
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sourcesOf(rows []*Prepared) string {
	set := map[string]int{}
	for _, p := range rows {
		set[p.Row.Source]++
	}
	var parts []string
	for k, v := range set {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

package nativecal

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/servebench"
)

// The quick probe prices a new host from the committed coefficients
// rather than refitting all of them: the committed fit (calibrate-native's
// 59 points) fixes how the step's terms relate, and a host differs from
// the fitting one mainly in three rates — how fast a core computes, how
// fast it streams weights from memory past its cache, and how long its
// per-call and per-step bookkeeping takes — and in where its cache ends.
// The probe measures the sgemm rate, a one-row GEMV's bandwidth over a
// working-set sweep (the cache cliff: NativeCoeffs.CacheBytes), and a few
// short bench-serve points (ProbeSweep), then scales each group of the
// committed time coefficients by one factor fitted on those points
// (FitTransfer), and the memory rule's fixed cost and workload term by
// the points' peak RSS when they measured it (the allocation rule: the
// rest of the memory rule is the program's, not the host's).

// probeGroups assigns each time coefficient (estimate.NativeTimeNames
// order) to the rate that scales it on another host: 0 compute, 1 weight
// streaming, 2 per-call and per-step overheads.
var probeGroups = [estimate.NumNativeTime]int{
	0, 0, // lin, lin_small
	2,    // fork
	1, 1, // pack, weight
	0,       // attn_flop
	2, 2, 2, // attn_task, elem, attn_block
	2, 2, 2, 2, // mlp_block, step, seq, alpha0
	1, // weight_dram
}

// probeGroupNames names the groups of probeGroups.
var probeGroupNames = [3]string{"compute", "weights", "overheads"}

// ProbeSweep is the quick probe's bench-serve points: short runs that
// separate the three groups — a prompt-heavy parent (compute), a
// decode-heavy parent and a wide model past the cache (weight streaming),
// a tiny model and a 2-layer one in the cache (overheads), and the
// 2-layer one with long prompts × 8 clients (the memory rule's workload
// term, fitProbeMemory) — each a few
// requests, so that the whole probe takes well under a minute on 2 cores.
// None is held out: the probe's accuracy is checked on other shapes
// (TestProbeAccuracy).
func ProbeSweep() []Point {
	byName := map[string]Shape{}
	for _, s := range fitShapes() {
		byName[s.name] = s.shape
	}
	pt := func(name string, isl, osl, conc int) Point {
		return Point{Name: name, Shape: byName[name], ISL: isl, OSL: osl, Conc: conc, Requests: max(2*conc, 4)}
	}
	return []Point{
		pt("parent", 256, 8, 4),
		pt("parent", 48, 32, 2),
		pt("wide", 32, 32, 1),
		pt("tiny", 16, 48, 1),
		pt("depth2", 32, 32, 4),
		pt("depth2", 384, 8, 8),
	}
}

// Probe is what the quick probe measured on this host.
type Probe struct {
	SgemmFLOPS float64
	// GEMV is the one-row product's bandwidth (bytes/s) at each working
	// set (bytes) of the sweep, and CacheBytes the cliff found in it.
	GEMV       []GEMVPoint
	CacheBytes float64
	Rows       []Row
	Took       time.Duration
}

// GEMVPoint is one working set of the GEMV sweep.
type GEMVPoint struct{ Bytes, Bps float64 }

// QuickProbe measures this host (sgemm rate, the GEMV sweep, the
// points pts (ProbeSweep when nil) run by run with one measured run each
// after at least two warm-ups) and fits the native coefficients by FitTransfer from
// prior (the committed ones). pf receives the points' progress.
func QuickProbe(ctx context.Context, parent *architecture.Model, run Runner, prior estimate.NativeCoeffs, pts []Point, pf progress.Func) (estimate.NativeCoeffs, *Probe, error) {
	if pts == nil {
		pts = ProbeSweep()
	}
	start := time.Now()
	p := &Probe{SgemmFLOPS: SgemmRate()}
	var err error
	if p.GEMV, err = GEMVSweep(ctx); err != nil {
		return estimate.NativeCoeffs{}, nil, err
	}
	p.CacheBytes = CacheCliff(p.GEMV)
	if p.Rows, err = Measure(ctx, parent, pts, run, servebench.Options{Repeats: 1, MaxWarmup: 2}, pf); err != nil {
		return estimate.NativeCoeffs{}, nil, err
	}
	co, err := FitTransfer(parent, p.Rows, prior, Threads(), p.CacheBytes)
	p.Took = time.Since(start)
	return co, p, err
}

// gemvSizes are the GEMV sweep's working sets: 256 KiB to 64 MiB in steps
// of √2.
func gemvSizes() []float64 {
	var out []float64
	for b := 256.0 * 1024; b <= 64<<20+1; b *= math.Sqrt2 {
		out = append(out, math.Round(b))
	}
	return out
}

// GEMVSweep times a one-row product y = x·Wᵀ on one thread (the decode
// step's path) over working sets from 256 KiB to 64 MiB of float32
// weights, each the best of a few passes after a warm one, and returns
// the bandwidth at each. A working set that fits in the cache the core
// sees stays there between passes; one that does not streams from memory.
func GEMVSweep(ctx context.Context) ([]GEMVPoint, error) {
	const k = 1024
	r := rand.New(rand.NewPCG(2, 2))
	maxN := int(gemvSizes()[len(gemvSizes())-1]) / 4 / k
	w := make([]float32, maxN*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	x, y := make([]float32, k), make([]float32, maxN)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var out []GEMVPoint
	for _, b := range gemvSizes() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := max(int(b)/4/k, 1)
		// Passes: enough to read about 64 MiB in all, at least 3.
		passes := max(3, int(64<<20/b))
		best := math.Inf(1)
		blas.SgemmSerial(false, true, 1, n, k, 1, x, k, w, k, 0, y, n)
		for range 3 {
			t0 := time.Now()
			for range passes {
				blas.SgemmSerial(false, true, 1, n, k, 1, x, k, w, k, 0, y, n)
			}
			best = math.Min(best, time.Since(t0).Seconds()/float64(passes))
		}
		out = append(out, GEMVPoint{Bytes: float64(4 * n * k), Bps: float64(4*n*k) / best})
	}
	return out, nil
}

// CacheCliff returns the largest working set of the sweep whose bandwidth
// is still above the geometric mean of the fastest (the cache's plateau)
// and that of the largest working set (memory's): where the weights stop
// fitting. 0 when the sweep shows no cliff (less than a 1.5× drop).
func CacheCliff(pts []GEMVPoint) float64 {
	if len(pts) < 2 {
		return 0
	}
	hi := 0.0
	for _, p := range pts {
		hi = math.Max(hi, p.Bps)
	}
	lo := pts[len(pts)-1].Bps
	if !(lo > 0) || hi < 1.5*lo {
		return 0
	}
	mid := math.Sqrt(hi * lo)
	cliff := 0.0
	for _, p := range pts {
		if p.Bps >= mid {
			cliff = p.Bytes
		}
	}
	return cliff
}

// FitTransfer fits the native coefficients of this host from prior (the
// committed fit) and rows measured here: the sgemm rate is the rows'
// median, the effective cache cacheBytes (prior's when 0), and each group
// of time coefficients (probeGroups) is prior's times one factor, fitted
// by non-negative least squares on the relative errors of the rows' TTFT,
// TPOT and time per output token. Each factor is bounded to
// [1/maxTransfer, maxTransfer]; one the rows do not see (or fit to 0)
// stays 1. When rows measured their peak RSS, the memory rule's fixed
// cost and workload term are refitted (fitProbeMemory). Held-out figures and
// provenance are cleared: the caller records the probe's.
func FitTransfer(parent *architecture.Model, rows []Row, prior estimate.NativeCoeffs, threads int, cacheBytes float64) (estimate.NativeCoeffs, error) {
	m, err := newModel(parent)
	if err != nil {
		return prior, err
	}
	if len(rows) < 2 {
		return prior, fmt.Errorf("nativecal: %d probe rows, need at least 2", len(rows))
	}
	var rates []float64
	for _, r := range rows {
		rates = append(rates, r.SgemmFLOPS)
	}
	base := prior
	base.SgemmFLOPS, base.Threads = median(rates), max(threads, 1)
	if !(base.SgemmFLOPS > 0) {
		return prior, fmt.Errorf("nativecal: the probe rows have no sgemm rate")
	}
	if cacheBytes > 0 {
		base.CacheBytes = cacheBytes
	}
	X, err := design(m, rows, base)
	if err != nil {
		return prior, err
	}
	pv := prior.TimeVector()
	G := make([][]float64, 0, len(X)+len(probeGroupNames))
	for _, row := range X {
		g := make([]float64, len(probeGroupNames))
		for k, v := range row {
			g[probeGroups[k]] += v * pv[k]
		}
		G = append(G, g)
	}
	scale := nnls(G)
	for i := range scale {
		norm := 0.0
		for _, g := range G {
			norm += g[i] * g[i]
		}
		if norm == 0 || scale[i] == 0 {
			scale[i] = 1 // the rows do not see the group: prior's
		}
		scale[i] = min(max(scale[i], 1/maxTransfer), maxTransfer)
	}
	var tv [estimate.NumNativeTime]float64
	for k := range tv {
		tv[k] = pv[k] * scale[probeGroups[k]]
	}
	co := base.WithTimeVector(tv)
	if err := fitProbeMemory(m, rows, &co); err != nil {
		return co, err
	}
	co.ErrTTFT, co.ErrTPOT, co.ErrThroughput, co.ErrMemory = 0, 0, 0, 0
	co.Rows, co.Source, co.Host, co.Measured = len(rows), "", nil, ""
	return co, nil
}

// maxTransfer bounds FitTransfer's group factors: a host 8× faster or
// slower in one rate than the fitting one is beyond what the probe's few
// points should be trusted to say.
const maxTransfer = 8

// TransferScales returns the three group factors FitTransfer applied,
// read back from the coefficients (for the report): compute, weights,
// overheads, each the ratio of a coefficient of the group to prior's (1
// where prior's is 0 throughout the group).
func TransferScales(co, prior estimate.NativeCoeffs) [3]float64 {
	out := [3]float64{1, 1, 1}
	v, pv := co.TimeVector(), prior.TimeVector()
	done := [3]bool{}
	for k := range v {
		g := probeGroups[k]
		if !done[g] && pv[k] > 0 {
			out[g], done[g] = v[k]/pv[k], true
		}
	}
	return out
}

// workloadTokens is the prompt tokens in flight (slots × prompt) from
// which a probe row tells the memory rule's workload term apart from its
// fixed cost: fitProbeMemory fits MemWork only when a row reaches it.
const workloadTokens = 2048

// fitProbeMemory refits the memory rule's fixed cost and, when a row has at
// least workloadTokens prompt tokens in flight, its workload term
// (MemWork, bytes per prompt token in flight), by least squares on the
// rows' measured peak RSS less the rest of the rule. Rows without a peak
// RSS are skipped; none: the rule is kept.
func fitProbeMemory(m *model, rows []Row, co *estimate.NativeCoeffs) error {
	var res, work []float64
	long := false
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
		parts.MemFixed, parts.MemWork = 0, 0
		c.SetNativeCoeffs(parts)
		rep, _ := c.Memory(s)
		w := float64(rep.InFlight) * float64(r.ISL)
		res, work = append(res, float64(r.PeakRSSBytes)-rep.TotalBytes()), append(work, w)
		long = long || w >= workloadTokens
	}
	if len(res) == 0 {
		return nil
	}
	if long && len(res) >= 3 {
		// res ≈ MemFixed + MemWork × work, both ≥ 0.
		mw, mr := mean(work), mean(res)
		var sxy, sxx float64
		for i := range res {
			sxy += (work[i] - mw) * (res[i] - mr)
			sxx += (work[i] - mw) * (work[i] - mw)
		}
		if sxx > 0 && sxy > 0 {
			co.MemWork = sxy / sxx
			co.MemFixed = math.Max(mr-co.MemWork*mw, 0)
			return nil
		}
	}
	co.MemWork = 0
	co.MemFixed = math.Max(median(res), 0)
	return nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

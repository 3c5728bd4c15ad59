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
// the fitting one mainly in four rates — how fast a core computes, how
// fast it streams weights from memory past its cache, what the packed
// path of steps of more than four rows costs per weight byte and call,
// and how long its per-call and per-step bookkeeping takes — and in where
// its cache ends. The probe measures the sgemm rate, a one-row GEMV's
// bandwidth over a working-set sweep (the cache cliff:
// NativeCoeffs.CacheBytes), and short bench-serve points of synthetic
// models none of which is a shape its accuracy is scored on (ProbeSweep),
// then scales each group of the committed time coefficients by one factor
// fitted on those points, shrunk towards one common factor (FitTransfer),
// and refits the memory rule on the points' peak RSS (fitProbeMemory).

// probeGroups assigns each time coefficient (estimate.NativeTimeNames
// order) to the rate that scales it on another host: 0 compute, 1 weight
// streaming, 2 the packed path of steps of more than four rows (its copy
// of the weights and its per-call fork), 3 per-call and per-step
// overheads.
var probeGroups = [estimate.NumNativeTime]int{
	0, 0, // lin, lin_small
	2,       // fork
	2,       // pack
	1,       // weight
	0,       // attn_flop
	3, 3, 3, // attn_task, elem, attn_block
	3, 3, 3, 3, // mlp_block, step, seq, alpha0
	1, // weight_dram
}

// probeGroupNames names the groups of probeGroups.
var probeGroupNames = [NumProbeGroups]string{"compute", "weights", "packed path", "overheads"}

// NumProbeGroups is the number of groups of time coefficients the probe
// scales (TransferScales).
const NumProbeGroups = 4

// ProbeSweep is the quick probe's bench-serve points: short runs of
// synthetic models that separate the groups — a prompt-heavy point
// (compute), a wide model past the cache at one, four and eight clients
// (weight streaming, and the packed path at eight), a tiny model and a
// 2-layer one in the cache (overheads), models without some attention or
// MLP sub-blocks (per-block costs), a 16-layer narrow model at two and
// eight clients (per-layer costs, and the memory rule's depth), six and
// eight clients (the packed path), two steady points of several rounds
// at six and eight clients whose steps mix prompt chunks with decoding,
// the 2-layer model with long prompts × 8 clients (the memory rule's
// workload term, fitProbeMemory), and the sweep's model far past the cache
// at one and eight clients (the bytes a real-size model streams from
// memory, plain and packed) — each a few requests, so that the whole probe takes under a minute on 2
// cores. None is a shape the probe's accuracy is scored on (the parent,
// its pruned children, a 30-layer model: TestProbeAccuracy).
func ProbeSweep() []Point {
	byName := map[string]Shape{}
	for _, s := range fitShapes() {
		byName[s.name] = s.shape
	}
	byName["deep16"] = probeDeepShape()
	pt := func(name string, isl, osl, conc int) Point {
		return Point{Name: name, Shape: byName[name], ISL: isl, OSL: osl, Conc: conc, Requests: max(2*conc, 4)}
	}
	// steady is a point of several rounds per client, so that most of its
	// steps mix one request's prompt chunk with the others' decoding, as a
	// long run's do.
	steady := func(name string, isl, osl, conc int) Point {
		p := pt(name, isl, osl, conc)
		p.Requests = 4 * conc
		return p
	}
	return []Point{
		pt("tiny", 32, 48, 1),
		pt("depth2", 32, 48, 4),
		pt("wide", 32, 32, 1),
		pt("wide", 64, 32, 4),
		pt("deep16", 64, 32, 2),
		pt("deep16", 32, 32, 8),
		pt("noattn6", 64, 48, 4),
		pt("nomlp3", 64, 48, 4),
		pt("heads4", 256, 8, 2),
		pt("depth2", 384, 8, 8),
		pt("wide", 32, 32, 8),
		pt("ffn256", 128, 32, 6),
		pt("hidden128", 48, 48, 2),
		steady("hidden128", 192, 64, 6),
		steady("depth4", 256, 64, 8),
		pt("large", 32, 16, 1),
		pt("large", 64, 16, 8),
	}
}

// probeDeepShape is the probe's deep model: 16 narrow layers (hidden 128,
// FFN 384), none of the held-out shapes, so that the per-layer costs and
// the memory rule see depth.
func probeDeepShape() Shape {
	s := Shape{Hidden: 128, Heads: 8, KVHeads: 2, HeadDim: 16}
	for range 16 {
		s.Layers = append(s.Layers, LayerShape{Attn: true, FFN: 384})
	}
	return s
}

// Probe is what the quick probe measured on this host.
type Probe struct {
	SgemmFLOPS float64
	// GEMV is the one-row product's bandwidth (bytes/s) at each working
	// set (bytes) of the sweep, and CacheBytes the cliff found in it (the
	// coefficients split the weights at probeSplit of it).
	GEMV       []GEMVPoint
	CacheBytes float64
	Rows       []Row
	// Retried is how many points were measured again because another
	// program took the cores while they ran (remeasureContended).
	Retried int
	Took    time.Duration
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
	o := servebench.Options{Repeats: 1, MaxWarmup: 2}
	if p.Rows, err = Measure(ctx, parent, pts, run, o, pf); err != nil {
		return estimate.NativeCoeffs{}, nil, err
	}
	if p.Retried, err = remeasureContended(ctx, parent, p.Rows, run, o); err != nil {
		return estimate.NativeCoeffs{}, nil, err
	}
	co, err := FitTransfer(parent, p.Rows, prior, Threads(), probeSplit(p.CacheBytes, prior.CacheBytes))
	p.Took = time.Since(start)
	return co, p, err
}

// probeSplit is the effective cache the probed coefficients split the
// weights at: the measured cliff when it is below the committed fit's
// split, else the committed split. The committed fit prices the weight
// bytes within its split at no cost (weight 0: on the engine it was fitted
// on, the step's time went to the bytes past it), so a larger split would
// make bytes free that the probe's points price through the weights
// factor instead; and bench-serve now reads bf16 weights in place, half
// the float32 bytes the split counts, which the one-row float32 GEMV does
// not see (ACCURACY.md). A smaller cliff moves the split down: bytes the
// host cannot keep are not priced as kept. 0 (no cliff): the committed split.
func probeSplit(cliff, committed float64) float64 {
	if cliff > 0 && (committed <= 0 || cliff < committed) {
		return cliff
	}
	return committed
}

// contendedShare is the fraction of the probe's median CPU share below
// which a point counts as contended: a point that got well under the
// cores the others got was slowed by another program, not by its shape.
const contendedShare = 0.6

// probeRetries bounds how often remeasureContended measures a point again.
const probeRetries = 2

// remeasureContended measures again, up to probeRetries times, each row
// whose CPU share is below contendedShare × the rows' median, and keeps
// the measurement with the highest share: the probe prices this host, not
// what else ran on it that second. It returns how many points it measured
// again. Rows without a CPU share are left alone.
func remeasureContended(ctx context.Context, parent *architecture.Model, rows []Row, run Runner, o servebench.Options) (int, error) {
	var shares []float64
	for _, r := range rows {
		if r.CPUShare > 0 {
			shares = append(shares, r.CPUShare)
		}
	}
	if len(shares) < 3 {
		return 0, nil
	}
	floor := contendedShare * median(shares)
	n := 0
	for i := range rows {
		for try := 0; try < probeRetries && rows[i].CPUShare > 0 && rows[i].CPUShare < floor; try++ {
			again, err := Measure(ctx, parent, []Point{rows[i].Point}, run, o, nil)
			if err != nil {
				return n, err
			}
			if try == 0 {
				n++
			}
			if len(again) == 1 && again[0].CPUShare > rows[i].CPUShare {
				rows[i] = again[0]
			}
		}
	}
	return n, nil
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
// weights, each the best of a few passes in each of gemvRounds rounds over
// all the sizes (after a warm one), and returns
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
	sizes := gemvSizes()
	best := make([]float64, len(sizes))
	for i := range best {
		best[i] = math.Inf(1)
	}
	// Rounds over every size, each size's best pass kept: a pass slowed
	// by another program on the machine (which would move the cliff) is
	// outvoted by the same size's passes in the other rounds.
	for range gemvRounds {
		for i, b := range sizes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n := max(int(b)/4/k, 1)
			// Passes: enough to read about 64 MiB in all, at least 3.
			passes := max(3, int(64<<20/b))
			blas.SgemmSerial(false, true, 1, n, k, 1, x, k, w, k, 0, y, n)
			t0 := time.Now()
			for range passes {
				blas.SgemmSerial(false, true, 1, n, k, 1, x, k, w, k, 0, y, n)
			}
			best[i] = math.Min(best[i], time.Since(t0).Seconds()/float64(passes))
		}
	}
	var out []GEMVPoint
	for i, b := range sizes {
		n := max(int(b)/4/k, 1)
		out = append(out, GEMVPoint{Bytes: float64(4 * n * k), Bps: float64(4*n*k) / best[i]})
	}
	return out, nil
}

// gemvRounds is how many times GEMVSweep goes over its working sets.
const gemvRounds = 4

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
	G := make([][]float64, 0, len(X))
	for _, row := range X {
		g := make([]float64, NumProbeGroups)
		for k, v := range row {
			g[probeGroups[k]] += v * pv[k]
		}
		G = append(G, g)
	}
	G = shrinkRows(G, probeShrink)
	scale := nnls(G)
	for i := range scale {
		norm := 0.0
		for _, g := range G {
			norm += g[i] * g[i]
		}
		if norm == 0 || scale[i] == 0 {
			scale[i] = 1 // the rows do not see the group: prior's
		}
		scale[i] = min(max(scale[i], 1.0/maxTransfer), maxTransfer)
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

// probeShrink is the weight, in equations, that pulls each group's factor
// towards the one common factor that best explains the probe's rows: the
// probe's few short points tell the groups apart only roughly, and a group
// the points barely see should follow the others rather than fit noise.
var probeShrink = 3

// shrinkRows returns G with w penalty rows per group the rows see, each
// β_g/s₀ with the target 1 of every row (nnls), where s₀ is the common
// factor minimising Σ(Σ_g G_g·s₀ − 1)².
func shrinkRows(G [][]float64, w int) [][]float64 {
	if w <= 0 || len(G) == 0 {
		return G
	}
	var num, den float64
	for _, row := range G {
		a := 0.0
		for _, v := range row {
			a += v
		}
		num += a
		den += a * a
	}
	if !(den > 0) || !(num > 0) {
		return G
	}
	s0 := num / den
	out := append([][]float64(nil), G...)
	for g := range G[0] {
		seen := false
		for _, row := range G {
			seen = seen || row[g] != 0
		}
		if !seen {
			continue
		}
		for range w {
			pen := make([]float64, len(G[0]))
			pen[g] = 1 / s0
			out = append(out, pen)
		}
	}
	return out
}

// maxTransfer bounds FitTransfer's group factors: a host 8× faster or
// slower in one rate than the fitting one is beyond what the probe's few
// points should be trusted to say.
const maxTransfer = 8

// TransferScales returns the group factors FitTransfer applied, read
// back from the coefficients (for the report): compute, weights, the
// packed path, overheads (probeGroupNames), each the ratio of a coefficient of the group to prior's (1
// where prior's is 0 throughout the group).
func TransferScales(co, prior estimate.NativeCoeffs) [NumProbeGroups]float64 {
	out := [NumProbeGroups]float64{1, 1, 1, 1}
	v, pv := co.TimeVector(), prior.TimeVector()
	done := [NumProbeGroups]bool{}
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

// fitProbeMemory refits the memory rule on the rows' measured peak RSS
// (rows without one are skipped; none: the rule is kept). What bench-serve
// holds at its peak (measured with GODEBUG=gctrace=1 on the parent and on
// 2- to 30-layer models of its widths, estimate/nativecal/ACCURACY.md) is
// the program's fixed cost, the checkpoint's weight matrices mapped in
// place (half the float32 bytes for a bf16 checkpoint), the live heap of
// KV cache and step buffers, and the kernels' garbage, which grows the
// heap only up to the collector's goal, about the live heap again
// (GOGC 100): past that a run's peak no longer grows with its steps and
// depth (the uncapped term priced a 30-layer model 61 % high). So the
// garbage term keeps its rate and is capped at the live buffers
// (MemGarbageCap 1), the weights count byte for byte at their stored
// width (MemHeap 1: a fitted multiplier, 0.66 on one host, priced a 1B
// child 27 % high), and the fixed cost, the buffers' multiplier and, when a row has at least workloadTokens prompt tokens in
// flight, the workload term are fitted by non-negative least squares on
// the relative error, each row taken as short of the cap or at it by the
// previous iterate (a few rounds; the probe's short runs are mostly short
// of it, long runs at it). Fewer than four rows: only the fixed cost
// moves.
func fitProbeMemory(m *model, rows []Row, co *estimate.NativeCoeffs) error {
	type part struct{ y, w, buf, work, garbage float64 }
	var ps []part
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
		parts.MemFixed, parts.MemHeap, parts.MemBuffers, parts.MemWork, parts.MemGarbageCap = 0, 1, 1, 0, 0
		c.SetNativeCoeffs(parts)
		rep, _ := c.Memory(s)
		w := float64(rep.InFlight) * float64(r.ISL)
		ps = append(ps, part{float64(r.PeakRSSBytes), rep.WeightsBytes, rep.KVPoolBytes + rep.ActivationBytes, w, rep.OverheadBytes})
		long = long || w >= workloadTokens
	}
	if len(ps) == 0 {
		return nil
	}
	co.MemGarbageCap, co.MemHeap = 1, 1
	if !long {
		co.MemWork = 0
	}
	live := func(p part) float64 { return co.MemBuffers*p.buf + co.MemWork*p.work }
	if len(ps) < 4 {
		var res []float64
		for _, p := range ps {
			res = append(res, p.y-co.MemHeap*p.w-live(p)-math.Min(p.garbage, live(p)))
		}
		co.MemFixed = math.Max(median(res), 0)
		return nil
	}
	for range 8 {
		var X, clamped [][]float64
		for _, p := range ps {
			k, g := 1.0, p.garbage // short of the cap: the garbage as priced
			if p.garbage >= live(p) {
				k, g = 2, 0 // at the cap: the live buffers twice
			}
			row := []float64{1 / p.y, k * p.buf / p.y}
			if long {
				row = append(row, k*p.work/p.y)
			}
			// The weights (resident byte for byte) and the garbage short
			// of the cap are known: move them to the target. A row whose
			// peak they explain to within a quarter (a model far past the
			// cache: its weights are most of its peak) says little about
			// the rest and would weigh its noise many times over: it is
			// left out while at least three rows remain.
			rest := p.y - g - p.w
			for j := range row {
				row[j] *= p.y / math.Max(rest, p.y/4)
			}
			if rest >= p.y/4 {
				X = append(X, row)
			}
			clamped = append(clamped, row)
		}
		if len(X) < 3 {
			X = clamped
		}
		b := nnls(X)
		co.MemFixed, co.MemHeap, co.MemBuffers = b[0], 1, b[1]
		if long {
			co.MemWork = b[2]
		}
	}
	return nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

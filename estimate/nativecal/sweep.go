package nativecal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/servebench"
	"github.com/autocompress/autocompress/workload"
)

// Point is one measurement of the sweep: a shape under a closed-loop
// workload of fixed lengths.
type Point struct {
	Name     string // the shape's name, e.g. "depth6"
	Shape    Shape
	ISL, OSL int
	Conc     int
	Requests int
	// HeldOut marks points kept out of the fit and scored by Validate.
	HeldOut bool
}

// workloads of the sweep: (isl, osl, concurrency).
type wl struct{ isl, osl, conc int }

var (
	// fitWorkloads cover prompt-heavy and decode-heavy steps, one to eight
	// clients and prompts that need several steps (8 × 128 > 512).
	fitWorkloads = []wl{{128, 64, 4}, {32, 96, 1}, {256, 32, 2}, {64, 64, 8}, {384, 16, 4}}
	// heldWorkloads are the setting plus lengths and concurrencies
	// no fitted row has.
	heldWorkloads = []wl{{128, 64, 4}, {96, 48, 2}, {200, 100, 6}}
)

type namedShape struct {
	name  string
	shape Shape
}

// fitShapes span the terms: width (FFN, hidden, heads), depth, removed
// attention, removed MLP, per-layer FFN and a larger model.
func fitShapes() []namedShape {
	return []namedShape{
		{"parent", parentShape()},
		{"ffn256", derive(func(s *Shape) {
			for i := range s.Layers {
				s.Layers[i].FFN = 256
			}
		})},
		{"depth4", derive(func(s *Shape) { s.Layers = s.Layers[:4] })},
		{"noattn6", derive(func(s *Shape) {
			for _, i := range []int{1, 2, 3, 4, 5, 7} {
				s.Layers[i].Attn = false
			}
		})},
		{"nomlp3", derive(func(s *Shape) {
			for _, i := range []int{2, 4, 6} {
				s.Layers[i].FFN = 0
			}
		})},
		{"heads4", derive(func(s *Shape) { s.Heads, s.KVHeads = 4, 1 })},
		{"hidden128", derive(func(s *Shape) { s.Hidden, s.HeadDim = 128, 16 })},
		{"wide", derive(func(s *Shape) {
			s.Hidden, s.Heads, s.KVHeads, s.HeadDim = 256, 4, 2, 64
			s.Layers = s.Layers[:6]
			for i := range s.Layers {
				s.Layers[i].FFN = 768
			}
		})},
		// Two small shapes whose weights (4.3 and 6.3 MiB) fit in the
		// cache share the others overflow, so that the fit sees both
		// sides of the effective cache (NativeCoeffs.CacheBytes).
		{"depth2", derive(func(s *Shape) { s.Layers = s.Layers[:2] })},
		{"tiny", derive(func(s *Shape) {
			s.Hidden, s.HeadDim = 128, 16
			s.Layers = s.Layers[:4]
			for i := range s.Layers {
				s.Layers[i].FFN = 256
			}
		})},
		{"ffn-mixed", derive(func(s *Shape) {
			for i, w := range []int{512, 256, 768, 256, 512, 256, 256, 768} {
				s.Layers[i].FFN = w
			}
		})},
		// One model far past the cache (67.6M parameters in its layers:
		// 135 MB of bf16 weights read every decode step, 4× the largest
		// last-level cache of the hosts here), so that the fit prices the
		// bytes a real-size model streams from memory, not from the cache.
		{"large", largeShape()},
	}
}

// largeShape is the sweep's model past the cache: hidden 1024, 16 query
// heads and 4 KV heads of 64, 6 layers of FFN 2816.
func largeShape() Shape {
	s := Shape{Hidden: 1024, Heads: 16, KVHeads: 4, HeadDim: 64}
	for range 6 {
		s.Layers = append(s.Layers, LayerShape{Attn: true, FFN: 2816})
	}
	return s
}

// largeChildShape is a held-out per-layer child past the cache, of
// another width and depth than largeShape: hidden 768, 12 query heads and
// 4 KV heads of 64, 8 layers of FFN 1024–2048, attention removed in one.
func largeChildShape() Shape {
	s := Shape{Hidden: 768, Heads: 12, KVHeads: 4, HeadDim: 64}
	for i, w := range []int{2048, 1536, 2048, 1024, 2048, 1536, 2048, 1024} {
		s.Layers = append(s.Layers, LayerShape{Attn: i != 5, FFN: w})
	}
	return s
}

// heldShapes are children a search would produce, none of them fitted:
// uniform FFN pruning, depth pruning, per-layer FFN, removed attention,
// all of them together, and a per-layer child past the cache of another
// width than the fitted one (largeChildShape). (Per-layer FFN widths are multiples of 256,
// as DeciLM checkpoints need.)
func heldShapes() []namedShape {
	return []namedShape{
		{"uniform384", derive(func(s *Shape) {
			for i := range s.Layers {
				s.Layers[i].FFN = 384
			}
		})},
		{"depth6", derive(func(s *Shape) { s.Layers = append(s.Layers[:2:2], s.Layers[4:]...) })},
		{"ffn-perlayer", derive(func(s *Shape) {
			for i, w := range []int{768, 512, 512, 256, 256, 512, 768, 512} {
				s.Layers[i].FFN = w
			}
		})},
		{"noattn3", derive(func(s *Shape) {
			for _, i := range []int{2, 3, 5} {
				s.Layers[i].Attn = false
			}
		})},
		{"combo", derive(func(s *Shape) {
			s.Layers = s.Layers[:7]
			for i, w := range []int{512, 256, 512, 256, 512, 256, 512} {
				s.Layers[i].FFN = w
			}
			s.Layers[3].Attn, s.Layers[5].Attn = false, false
		})},
		{"large-child", largeChildShape()},
	}
}

// DesignedSweep returns the calibration sweep: 12 fitted shapes, each
// under four of the five fit workloads (rotated, so that every workload
// meets every kind of shape), and 6 held-out shapes under the three
// held-out workloads. Each point runs 8 requests per client (at least 16).
// The held-out points are spread evenly between the fitted ones, so that a
// change of the machine's state during the sweep (other tenants of its
// cache, load) falls on both sets alike.
func DesignedSweep() []Point {
	var fit, held []Point
	for i, s := range fitShapes() {
		for j := range 4 {
			w := fitWorkloads[(i+j)%len(fitWorkloads)]
			fit = append(fit, Point{Name: s.name, Shape: s.shape, ISL: w.isl, OSL: w.osl, Conc: w.conc, Requests: max(8*w.conc, 16)})
		}
	}
	for _, w := range heldWorkloads {
		for _, s := range heldShapes() {
			held = append(held, Point{Name: s.name, Shape: s.shape, ISL: w.isl, OSL: w.osl, Conc: w.conc, Requests: max(8*w.conc, 16), HeldOut: true})
		}
	}
	return interleave(fit, held)
}

// interleave returns a and b merged with b's elements spread evenly among
// a's, both in their own order.
func interleave(a, b []Point) []Point {
	out := make([]Point, 0, len(a)+len(b))
	j := 0
	for i := range a {
		for j < len(b) && j*len(a) <= i*len(b) {
			out = append(out, b[j])
			j++
		}
		out = append(out, a[i])
	}
	return append(out, b[j:]...)
}

// QuickSweep is a tiny sweep (four points, short requests) that exercises
// the machinery in about a minute; its figures are not a calibration.
func QuickSweep() []Point {
	f, h := fitShapes(), heldShapes()
	return []Point{
		{Name: f[0].name, Shape: f[0].shape, ISL: 32, OSL: 16, Conc: 2, Requests: 8},
		{Name: f[3].name, Shape: f[3].shape, ISL: 64, OSL: 8, Conc: 1, Requests: 4},
		{Name: f[2].name, Shape: f[2].shape, ISL: 16, OSL: 32, Conc: 4, Requests: 8},
		{Name: h[1].name, Shape: h[1].shape, ISL: 32, OSL: 16, Conc: 2, Requests: 8, HeldOut: true},
	}
}

// Runner measures one point on the model saved in dir.
type Runner func(ctx context.Context, dir string, p Point, o servebench.Options) (*servebench.Report, error)

// InProcess measures in this process with servebench.Run. Its peak RSS is
// the process's high-water mark over everything it ran, so rows measured
// this way carry no memory figure (PeakRSSBytes 0).
func InProcess(ctx context.Context, dir string, p Point, o servebench.Options) (*servebench.Report, error) {
	m, err := engine.Load(dir)
	if err != nil {
		return nil, err
	}
	w := workload.FixedClosed(p.ISL, p.OSL, p.Conc)
	w.NumRequests = p.Requests
	w.Seed = 1
	rep, err := servebench.Run(ctx, m, &w, o, nil)
	if err != nil {
		return nil, err
	}
	rep.PeakRSSBytes = 0
	return rep, nil
}

// BenchServeArgs is the command line (after the program name) that measures
// point p of the model in dir.
func BenchServeArgs(dir string, p Point, o servebench.Options) []string {
	args := []string{"bench-serve", "--model", dir, "--isl", strconv.Itoa(p.ISL), "--osl", strconv.Itoa(p.OSL),
		"--concurrency", strconv.Itoa(p.Conc), "--num-requests", strconv.Itoa(p.Requests), "--json"}
	if o.Repeats > 0 {
		args = append(args, "--repeats", strconv.Itoa(o.Repeats))
	}
	if o.MaxWarmup > 0 {
		args = append(args, "--max-warmup", strconv.Itoa(max(o.MaxWarmup, 2)))
	}
	return args
}

// Exec returns a Runner that runs "exe bench-serve ... --json" in a child
// process per point, so that each row's peak RSS (VmHWM) is that of a
// fresh process serving one model, as bench-serve reports it.
func Exec(exe string) Runner {
	return func(ctx context.Context, dir string, p Point, o servebench.Options) (*servebench.Report, error) {
		args := BenchServeArgs(dir, p, o)
		cmd := exec.CommandContext(ctx, exe, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%s %v: %w: %s", exe, args, err, bytes.TrimSpace(errb.Bytes()))
		}
		var rep servebench.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return nil, fmt.Errorf("bench-serve output: %w", err)
		}
		return &rep, nil
	}
}

// Measure builds each point's model with random weights (seeded, bf16
// checkpoint like the parent's, in a temporary directory removed
// afterwards), measures the machine's sgemm rate just before it, runs it
// with run and returns the rows. parent is the parent's architecture. On
// an error or cancellation it returns the rows measured so far with it.
// Each measured point is reported through pf (stage "nativecal", unit
// "point"), its figures as a note.
func Measure(ctx context.Context, parent *architecture.Model, pts []Point, run Runner, o servebench.Options, pf progress.Func) ([]Row, error) {
	tmp, err := os.MkdirTemp("", "nativecal-") //output:not-an-output: scratch models, removed on return
	if err != nil {
		return nil, fmt.Errorf("nativecal: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Build every model first, so that a shape that cannot be saved fails
	// before any measuring.
	dirs := map[string]string{}
	for _, p := range pts {
		key := p.Shape.String()
		if _, ok := dirs[key]; ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir := filepath.Join(tmp, strconv.Itoa(len(dirs)))
		m, err := engine.New(p.Shape.Arch(parent), uint64(len(dirs)+1))
		if err != nil {
			return nil, fmt.Errorf("nativecal: shape %s (%s): %w", p.Name, key, err)
		}
		if err := m.Save(dir, checkpoint.BF16); err != nil {
			return nil, fmt.Errorf("nativecal: shape %s (%s): %w", p.Name, key, err)
		}
		dirs[key] = dir
	}
	task := progress.Start(pf, progress.Event{Stage: "nativecal", Total: int64(len(pts)), Unit: "point"})
	var rows []Row
	for i, p := range pts {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		dir := dirs[p.Shape.String()]
		rate := SgemmRate()
		rep, err := run(ctx, dir, p, o)
		if err != nil {
			return rows, fmt.Errorf("nativecal: point %d (%s, isl %d, osl %d, concurrency %d): %w", i, p.Name, p.ISL, p.OSL, p.Conc, err)
		}
		r := rowOf(p, rep, rate)
		rows = append(rows, r)
		task.Notef("%d/%d %s %d/%d/%d: TTFT %.1f ms, TPOT %.3f ms, %.0f tok/s, %.1f MiB, CPU share %.0f%%", i+1, len(pts),
			r.Name, r.ISL, r.OSL, r.Conc, 1e3*r.TTFT, 1e3*r.TPOT, r.OutputTPS, float64(r.PeakRSSBytes)/(1<<20), 100*r.CPUShare)
		task.Set(int64(i+1), "")
	}
	return rows, nil
}

// SgemmRate measures the best FLOP/s of three 1024³ NT products with all
// threads (the engine's forward GEMM shape, as engine's benchmarks measure
// the peak), after one untimed product.
func SgemmRate() float64 {
	const n = 1024
	r := rand.New(rand.NewPCG(1, 1))
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	best := 0.0
	for i := range 4 {
		t0 := time.Now()
		blas.Sgemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n)
		if i > 0 {
			best = max(best, 2*n*n*n/time.Since(t0).Seconds())
		}
	}
	return best
}

// Threads is the number of compute threads the measurements use.
func Threads() int { return runtime.GOMAXPROCS(0) }

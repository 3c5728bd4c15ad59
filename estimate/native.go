package estimate

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/autocompress/autocompress/hardware"
)

// The native engine (package engine) is priced by its own rules, not
// llama.cpp's: it holds every weight in float32, keeps a float32 KV cache
// of exactly prompt + output tokens per request, grows its step buffers to
// the largest step it ran, and its scheduler (engine.Model.Serve) runs
// every sequence in flight in one step, decoders first, then prompt chunks
// of at most 512 tokens in all. Its time and memory coefficients are
// measured on the machine by "autocompress calibrate-native" (package
// estimate/nativecal) and live in native_coefficients.json, apart from the
// public-data fit of coefficients.json.

// NativeCoeffs are the fitted step-time and memory coefficients of the
// native engine on one machine. Time multipliers are dimensionless (1 = the
// basis term at the measured rate); overheads are in seconds.
type NativeCoeffs struct {
	// SgemmFLOPS is the machine's measured sgemm rate (FLOP/s) on a 1024³
	// product with all threads, measured when the coefficients were fitted:
	// the rate the compute terms divide by.
	SgemmFLOPS float64 `json:"sgemm_flops"`
	// BandwidthBps is the bytes per second the weight term divides by (the
	// hardware entry's nominal figure when fitted).
	BandwidthBps float64 `json:"bandwidth_bps"`
	// Threads is the number of compute threads the rows were measured with.
	Threads int `json:"threads"`

	// Lin prices the linear layers and LM head of steps of more than four
	// rows (the packed sgemm path), LinSmall those of at most four (the
	// dot-product path); both multiply threads × FLOPs on the busiest
	// thread ÷ SgemmFLOPS, so 1 is one core running at its share of the
	// measured rate (see nativeTerms).
	Lin       float64 `json:"lin"`
	LinSmall  float64 `json:"lin_small"`
	Fork      float64 `json:"fork"`       // s per linear call of a step of more than four rows (goroutines of the packed path)
	Pack      float64 `json:"pack"`       // × weight bytes ÷ BandwidthBps in steps of more than four rows (the packed path copies every weight matrix per call)
	Weight    float64 `json:"weight"`     // × weight bytes read per step ÷ BandwidthBps (the first CacheBytes of them when CacheBytes > 0)
	AttnFLOP  float64 `json:"attn_flop"`  // × threads × attention FLOPs on the busiest thread ÷ SgemmFLOPS
	AttnTask  float64 `json:"attn_task"`  // s per (sequence × query head × attention layer) task on the busiest thread
	Elem      float64 `json:"elem"`       // s per token row × element of elementwise width on the busiest thread (norms, RoPE, activation, residuals)
	AttnBlock float64 `json:"attn_block"` // s per attention sub-block per step
	MLPBlock  float64 `json:"mlp_block"`  // s per MLP sub-block per step
	Step      float64 `json:"step"`       // s per step
	Seq       float64 `json:"seq"`        // s per sequence in a step (logits row, argmax, bookkeeping)
	Alpha0    float64 `json:"alpha0"`     // s per request added to TTFT
	// WeightDRAM prices the weight bytes read per step beyond CacheBytes
	// (× bytes ÷ BandwidthBps): what the step streams from memory rather
	// than from the last-level cache.
	WeightDRAM float64 `json:"weight_dram"`
	// CacheBytes is the machine's effective last-level cache for the
	// weights, fitted with the coefficients (the size that explains the
	// rows best; calibrate-native searches it): a model whose weights fit
	// in it decodes at cache speed, the rest of a larger one at memory
	// speed. On a VM whose cache is shared with other tenants it is the
	// share the calibration saw, and a model near it measures fast or slow
	// from one minute to the next (estimate/nativecal/ACCURACY.md). 0: no
	// split (every byte priced by Weight).
	CacheBytes float64 `json:"cache_bytes,omitempty"`

	// Peak memory (bench-serve's VmHWM) = MemFixed + MemHeap × the
	// weights at the width they are stored at (Summary.StoredBits: the
	// engine maps the checkpoint and reads bf16 in place, and every step
	// touches every page) + MemBuffers × (KV cache + step buffers) + MemWork × slots ×
	// prompt tokens + MemGarbage × layers × steps × √slots (at most
	// MemGarbageCap × the buffers when that is set), where slots = min(clients, sequence limit)
	// and steps = requests per slot × (output + 1) of a run (with a slot
	// per client, as in every calibration row, slots = clients): the
	// engine's parallel kernels allocate a little
	// per call (goroutine closures; more calls split with more rows), and
	// that garbage grows the heap until the collector runs, so the peak
	// grows with the length of a run. The garbage term is empirical (the
	// square root fitted the first sweep's rows best among the forms
	// tried: steps, steps × clients, tokens, requests).
	MemFixed float64 `json:"mem_fixed_bytes"`
	// MemHeap is 1 in every fit (calibrate-native and the quick probe
	// hold it there): mapped weights are resident byte for byte. Fits
	// before that priced the weights at float32 and fitted a fraction of
	// them (0.1–0.66) on models of 4–23 MiB, which put a 1B child's peak
	// 27 % high and a Llama-3.1-8B at 19.4 GiB where it runs in 15.
	MemHeap    float64 `json:"mem_heap"`
	MemBuffers float64 `json:"mem_buffers"`
	MemGarbage float64 `json:"mem_garbage_bytes"`
	// MemWork is the workload's term of the memory rule: bytes per prompt
	// token in flight (slots × prompt length), the growth long prompts ×
	// many clients showed beyond the KV cache and step buffers (25–44 %
	// low at 384-token prompts × 8 clients without it; estimate/nativecal/
	// ACCURACY.md). Fitted by the quick probe, whose points include such a
	// workload (nativecal.FitTransfer); 0 (absent) in a fit whose rows have
	// none, as the committed sweep's.
	MemWork float64 `json:"mem_work_bytes,omitempty"`
	// MemGarbageCap bounds the garbage term at this multiple of the live
	// buffers (KV cache, step buffers and the workload term, as priced
	// above): Go's collector lets garbage grow the heap to its goal, about
	// GOGC/100 = 1 times the live heap beyond it, and collects there, so
	// a long run's peak stops growing with its steps and its depth
	// (measured with GODEBUG=gctrace=1: estimate/nativecal/ACCURACY.md).
	// 0 (absent): no bound, as in the committed fit, whose rows are
	// mostly short of it. The quick probe sets it to 1.
	MemGarbageCap float64 `json:"mem_garbage_cap,omitempty"`
	// Rule is the version of the native model a host's cached probe was
	// fitted for (NativeRule); a cache of another version is probed again.
	Rule int `json:"rule,omitempty"`

	// Held-out figures written by calibrate-native: median APE (fractions).
	ErrTTFT       float64 `json:"err_ttft,omitempty"`
	ErrTPOT       float64 `json:"err_tpot,omitempty"`
	ErrThroughput float64 `json:"err_throughput,omitempty"`
	ErrMemory     float64 `json:"err_memory,omitempty"`
	Rows          int     `json:"rows,omitempty"`
	Source        string  `json:"source,omitempty"`
	// Host and Measured say where and when the fitted rows were measured
	// (the rows' own record, estimate/nativecal.Provenance): the held-out
	// figures above are that host's, at that time. Absent: not recorded.
	Host     *hardware.Host `json:"measured_on,omitempty"`
	Measured string         `json:"measured,omitempty"`
}

// NumNativeTime is the number of time coefficients (NativeCoeffs.TimeVector).
const NumNativeTime = 14

// NativeTimeNames names the entries of NativeCoeffs.TimeVector.
var NativeTimeNames = [NumNativeTime]string{"lin", "lin_small", "fork", "pack", "weight", "attn_flop", "attn_task", "elem", "attn_block", "mlp_block", "step", "seq", "alpha0", "weight_dram"}

// TimeVector returns the time coefficients in NativeTimeNames order.
func (c NativeCoeffs) TimeVector() [NumNativeTime]float64 {
	return [NumNativeTime]float64{c.Lin, c.LinSmall, c.Fork, c.Pack, c.Weight, c.AttnFLOP, c.AttnTask, c.Elem, c.AttnBlock, c.MLPBlock, c.Step, c.Seq, c.Alpha0, c.WeightDRAM}
}

// WithTimeVector returns c with the time coefficients replaced.
func (c NativeCoeffs) WithTimeVector(v [NumNativeTime]float64) NativeCoeffs {
	c.Lin, c.LinSmall, c.Fork, c.Pack, c.Weight, c.AttnFLOP, c.AttnTask, c.Elem, c.AttnBlock, c.MLPBlock, c.Step, c.Seq, c.Alpha0, c.WeightDRAM =
		v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13]
	return c
}

// NativeCoeffFile is the document in native_coefficients.json.
type NativeCoeffFile struct {
	Comment string `json:"comment"`
	Command string `json:"command"`
	// Host, Measured and Load describe where and when the rows were measured.
	Host     string `json:"host"`
	Measured string `json:"measured"`
	Load     string `json:"load"`
	// Machines maps a hardware name ("cpu-local") to its coefficients.
	Machines map[string]NativeCoeffs `json:"machines"`
}

// ParseNativeCoeffs reads a native coefficient file and checks every value.
func ParseNativeCoeffs(b []byte) (*NativeCoeffFile, error) {
	var f NativeCoeffFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("native coefficient file: %w", err)
	}
	if len(f.Machines) == 0 {
		return nil, errors.New("native coefficient file: no machines")
	}
	for name, c := range f.Machines {
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("native coefficient file: machine %s: %w", name, err)
		}
	}
	return &f, nil
}

func (c *NativeCoeffs) check() error {
	if !(c.SgemmFLOPS > 0) || !(c.BandwidthBps > 0) || math.IsInf(c.SgemmFLOPS, 0) || math.IsInf(c.BandwidthBps, 0) {
		return fmt.Errorf("sgemm_flops %g and bandwidth_bps %g must be positive", c.SgemmFLOPS, c.BandwidthBps)
	}
	v := c.TimeVector()
	all := append(v[:], c.MemFixed, c.MemHeap, c.MemBuffers, c.MemGarbage, c.MemWork, c.MemGarbageCap, c.CacheBytes)
	for i, x := range all {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			name := "memory"
			switch {
			case i < NumNativeTime:
				name = NativeTimeNames[i]
			case i == len(all)-1:
				name = "cache_bytes"
			}
			return fmt.Errorf("%s has an invalid value %g", name, x)
		}
	}
	return nil
}

//go:embed native_coefficients.json
var embeddedNative []byte

var defaultNative = func() *NativeCoeffFile {
	f, err := ParseNativeCoeffs(embeddedNative)
	if err != nil {
		panic("estimate: embedded native_coefficients.json: " + err.Error())
	}
	return f
}()

// DefaultNativeCoeffs returns the embedded native coefficient file.
func DefaultNativeCoeffs() *NativeCoeffFile { return defaultNative }

// NativeCoeffsEnv names the environment variable that points at a native
// coefficient file to use instead of the embedded one.
const NativeCoeffsEnv = "AUTOCOMPRESS_NATIVE_COEFFS"

// NativeCoeffsPath returns the local override path, where
// "autocompress calibrate-native" writes by default:
// $AUTOCOMPRESS_NATIVE_COEFFS when set, else
// <user config dir>/autocompress/native_coefficients.json (on Linux
// ~/.config/autocompress/native_coefficients.json).
func NativeCoeffsPath() (string, error) {
	if p := os.Getenv(NativeCoeffsEnv); p != "" {
		return p, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("native coefficients: %w", err)
	}
	return filepath.Join(d, "autocompress", "native_coefficients.json"), nil
}

// NativeCacheEnv names the environment variable that points at the
// directory of per-host native calibrations (the quick probe's, one file
// per host fingerprint) instead of <user config dir>/autocompress/hosts.
const NativeCacheEnv = "AUTOCOMPRESS_NATIVE_CACHE"

// NativeCacheDir returns the directory of per-host native calibrations:
// $AUTOCOMPRESS_NATIVE_CACHE when set, else
// <user config dir>/autocompress/hosts (on Linux
// ~/.config/autocompress/hosts).
func NativeCacheDir() (string, error) {
	if p := os.Getenv(NativeCacheEnv); p != "" {
		return p, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("native calibration cache: %w", err)
	}
	return filepath.Join(d, "autocompress", "hosts"), nil
}

var activeNative struct {
	once sync.Once
	f    *NativeCoeffFile
	src  string
	err  error
	// set is the coefficients UseNativeCoeffs chose for this process (a
	// per-host calibration), used instead of the file lookup.
	mu     sync.Mutex
	set    *NativeCoeffFile
	setSrc string
}

// UseNativeCoeffs makes f (named src: where it came from, as the
// estimates' family "native@src" names it) the native coefficients every
// later estimate in this process uses, in place of ActiveNativeCoeffs's
// file lookup: the per-host calibration estimate/nativecal.Resolve chose.
// It returns a function that restores the previous choice (for tests). f
// must have passed ParseNativeCoeffs.
func UseNativeCoeffs(f *NativeCoeffFile, src string) (restore func()) {
	a := &activeNative
	a.mu.Lock()
	defer a.mu.Unlock()
	old, oldSrc := a.set, a.setSrc
	a.set, a.setSrc = f, src
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.set, a.setSrc = old, oldSrc
	}
}

// FileNativeCoeffs returns the native coefficients of the file lookup
// alone, whatever UseNativeCoeffs chose: the file at NativeCoeffsPath when
// it exists (a local calibration), else the embedded one, and where they
// came from ("embedded" or the path). It is read once per process; a
// malformed override is an error, not ignored.
func FileNativeCoeffs() (*NativeCoeffFile, string, error) {
	a := &activeNative
	a.once.Do(func() {
		a.f, a.src = defaultNative, "embedded"
		p, err := NativeCoeffsPath()
		if err != nil {
			return // no config directory: the embedded file
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && os.Getenv(NativeCoeffsEnv) == "" {
			return
		}
		if errors.Is(err, fs.ErrNotExist) {
			a.err = fmt.Errorf("native coefficients: $%s names %s, which does not exist (a native calibration writes it there; unset the variable to use the embedded coefficients)", NativeCoeffsEnv, p)
			return
		}
		if err != nil {
			a.err = fmt.Errorf("native coefficients %s: %w", p, err)
			return
		}
		f, err := ParseNativeCoeffs(b)
		if err != nil {
			a.err = fmt.Errorf("%s: %w", p, err)
			return
		}
		a.f, a.src = f, p
	})
	return a.f, a.src, a.err
}

// ActiveNativeCoeffs returns the native coefficients estimate uses and
// where they came from: those UseNativeCoeffs chose for this process (a
// per-host calibration) when it was called, else FileNativeCoeffs's.
func ActiveNativeCoeffs() (*NativeCoeffFile, string, error) {
	a := &activeNative
	a.mu.Lock()
	f, src := a.set, a.setSrc
	a.mu.Unlock()
	if f != nil {
		return f, src, nil
	}
	return FileNativeCoeffs()
}

// Machine returns the coefficients for hardware name, falling back to
// "cpu-local" (the only machine calibrated in the embedded file).
func (f *NativeCoeffFile) Machine(name string) (NativeCoeffs, string) {
	if c, ok := f.Machines[name]; ok {
		return c, name
	}
	if c, ok := f.Machines["cpu-local"]; ok {
		return c, "cpu-local"
	}
	names := sortedKeys(f.Machines)
	return f.Machines[names[0]], names[0]
}

// NativeRule is the version of the native step and memory rules that a
// host's cached quick probe records (NativeCoeffs.Rule): 2 since the
// weights count at their stored width with MemHeap 1; 3 since a step's
// weight reads count at their stored width too (CacheBytes is then in
// stored bytes, as the probe's cache cliff is) and the fit has a model
// far past the cache. A cached probe of an earlier rule does not describe
// these estimates and is measured again.
const NativeRule = 3

// nativePrecision is how the native engine holds weights: float32.
var nativePrecision = Precision{Name: "f32", LinearBPW: 32, EmbedBPW: 32, HeadBPW: 32, SmallBPW: 32, Compute: "bf16"}

// nativePrefill is engine.Serve's default prompt-token budget per step.
const nativePrefill = 512

// resolveNative fills the resolved options of the native engine: float32
// weights and KV cache whatever the checkpoint's dtype, the sequence
// limit given (Compile makes a closed loop's default its clients; fewer
// make the other clients queue, see nativeLoop), 512 prompt tokens per
// step.
func resolveNative(o Options, maxLen int) (resolved, error) {
	r := resolved{eng: Native, tp: 1, maxLen: maxLen, prec: nativePrecision, kv: kvTypes["fp32"], stateBytes: 4, memFraction: 1}
	switch o.Precision {
	case "", "f32", "fp32", "float32", "bf16", "fp16", "f16":
	default:
		return r, &UnsupportedError{Msg: "precision " + o.Precision + ": the native engine holds every weight in float32 (bf16, f16 and f32 checkpoints are converted on load); it has no quantized kernels"}
	}
	switch o.KVDType {
	case "", "auto", "fp32", "f32":
	default:
		return r, &UnsupportedError{Msg: "KV type " + o.KVDType + ": the native engine keeps its KV cache in float32"}
	}
	if o.TP > 1 {
		return r, &UnsupportedError{Msg: "the native engine runs on one machine (no tensor parallelism)"}
	}
	if r.maxLen <= 0 {
		r.maxLen = o.MaxModelLen
	}
	if r.maxLen <= 0 {
		r.maxLen = 4096
	}
	r.maxSeqs = or(o.MaxNumSeqs, 1)
	r.budgetToks = or(o.MaxBatchedTokens, nativePrefill)
	if r.maxSeqs < 1 || r.budgetToks < 1 {
		return r, &UnsupportedError{Msg: "max sequences and batched tokens must be ≥ 1"}
	}
	return r, nil
}

// The thresholds of the native engine's kernels that decide what runs on
// one core (engine/blas and engine): a product of at most nativeSmallRows
// rows takes the dot-product path, serial up to nativeSmallSerial
// multiply-adds; a larger product splits its rows into blocks of
// nativeRowBlock across the threads (one block: one core); decode
// attention below nativeAttnSerial multiply-adds runs on one core, larger
// steps split their (sequence, head) tasks into one contiguous run per
// thread; the elementwise kernels run serially up to about
// nativeElemSerial rows.
const (
	nativeSmallRows   = 4
	nativeSmallSerial = 1 << 23
	nativeRowBlock    = 96
	nativeAttnSerial  = 1 << 22
	nativeElemSerial  = 16
)

// nativeTerms is the native engine's step model: every basis term is
// linear in the coefficients, so that calibration fits them by least
// squares. The work of a step is priced on its busiest thread: decoding
// steps of a few rows run almost entirely on one core, prompt chunks on
// all of them (measured: bench-serve's CPU share is about 1/threads in
// decode-bound runs).
type nativeTerms struct {
	lin, linSmall, attnPerFLOP, weights, pack, packHead, perTask, perElem, fixed, perSeq, fork float64
	threads                                                                                    float64
	calls                                                                                      float64 // linear calls per step, LM head excluded
	smallParallel                                                                              float64 // rows from which a small product exceeds nativeSmallSerial
	headParallel                                                                               float64
	attnWork                                                                                   float64 // multiply-adds per (query × context) pair per attention layer
}

func newNativeTerms(s *Summary, c *NativeCoeffs) nativeTerms {
	th := float64(max(c.Threads, 1))
	n := nativeTerms{
		lin:         th * c.Lin / c.SgemmFLOPS,
		linSmall:    th * c.LinSmall / c.SgemmFLOPS,
		attnPerFLOP: th * c.AttnFLOP / c.SgemmFLOPS,
		weights:     c.weightTime(s.DenseBytes * storedShare(s)),
		pack:        c.Pack * (s.DenseBytes - s.HeadBytes) / c.BandwidthBps,
		packHead:    c.Pack * s.HeadBytes / c.BandwidthBps,
		perTask:     c.AttnTask * s.AttnHeads,
		perElem:     c.Elem * s.ElemWidth,
		fixed:       c.AttnBlock*float64(s.AttnLayers) + c.MLPBlock*float64(s.MLPLayers) + c.Step,
		perSeq:      c.Seq,
		fork:        c.Fork,
		threads:     th,
		calls:       float64(4*s.AttnLayers + 3*s.MLPLayers),
	}
	n.smallParallel = math.Inf(1)
	if w := float64(s.Hidden) * float64(max(s.MaxFFN, s.MaxQDim, 1)); w > 0 {
		n.smallParallel = nativeSmallSerial / w
	}
	n.headParallel = math.Inf(1)
	if w := float64(s.Hidden) * float64(s.Vocab); w > 0 {
		n.headParallel = nativeSmallSerial / w
	}
	if s.AttnLayers > 0 {
		n.attnWork = s.AttnFLOPs / float64(s.AttnLayers) / 2
	}
	return n
}

// storedShare is the share of its float32 width at which a summary's
// weights are stored and read: the engine reads a bf16 or f16 checkpoint
// in place, so a step streams half the float32 bytes from memory
// (Summary.StoredBits). The packed path's copies are float32 whatever the
// checkpoint stores (engine/blas SgemmHalf converts each tile first).
func storedShare(s *Summary) float64 { return float64(max(s.StoredBits, 16)) / 32 }

// weightTime is the time to read b bytes of weights in a step: the first
// CacheBytes at the cache's rate (Weight), the rest at memory's
// (WeightDRAM); every byte at Weight's when CacheBytes is 0.
func (c *NativeCoeffs) weightTime(b float64) float64 {
	if c.CacheBytes <= 0 {
		return c.Weight * b / c.BandwidthBps
	}
	in := math.Min(b, c.CacheBytes)
	return (c.Weight*in + c.WeightDRAM*(b-in)) / c.BandwidthBps
}

// busiestRows is the most rows one of threads handles in a product of
// rows rows split into blocks of nativeRowBlock, the blocks taken in order
// by the least-loaded thread (the packed path's work stealing).
func busiestRows(rows, threads float64) float64 {
	if rows <= nativeRowBlock || threads <= 1 {
		return rows
	}
	blocks := math.Ceil(rows / nativeRowBlock)
	full := blocks - 1 // the last block holds the remainder
	rem := rows - full*nativeRowBlock
	q := math.Floor(full / threads)
	most := q * nativeRowBlock
	if full-q*threads > 0 {
		most += nativeRowBlock
	}
	return math.Max(most, q*nativeRowBlock+rem)
}

// linear prices the products of a step of rows rows per call and calls
// calls (FLOPs per row flops): the dot-product path at most
// nativeSmallRows rows (serial below parallelFrom rows), else the packed
// path with its per-call fork.
func (n *nativeTerms) linear(flops, rows, calls, parallelFrom float64) (compute, overhead float64) {
	if rows <= 0 || flops <= 0 {
		return 0, 0
	}
	if rows <= nativeSmallRows {
		busy := rows
		if rows > parallelFrom {
			busy = rows / n.threads
		}
		return n.linSmall * flops * busy, 0
	}
	return n.lin * flops * busiestRows(rows, n.threads), n.fork * calls
}

// attention returns the attention pairs and the sequences on the busiest
// thread of a step: one thread below nativeAttnSerial multiply-adds per
// layer; else the step's sequences (decoders first, then prompt chunks)
// in one contiguous run per thread.
func (n *nativeTerms) attention(b Batch) (pairs, seqs float64) {
	d, p := b.Decode, b.PrefillSeq
	all := d + p
	if n.threads <= 1 || (b.PrefillAtt+b.DecodeCtx)*n.attnWork < nativeAttnSerial || all <= 1 {
		return b.PrefillAtt + b.DecodeCtx, all
	}
	per := math.Ceil(all / n.threads)
	for lo := 0.0; lo < all; lo += per {
		hi := math.Min(lo+per, all)
		dec := math.Max(math.Min(hi, d)-lo, 0)
		pre := hi - lo - dec
		w := 0.0
		if d > 0 {
			w += dec * b.DecodeCtx / d
		}
		if p > 0 {
			w += pre * b.PrefillAtt / p
		}
		if w > pairs {
			pairs, seqs = w, hi-lo
		}
	}
	return pairs, seqs
}

// terms prices one native step. Every sequence in the step computes a
// logits row (the last row of its chunk), finished prompt or not.
func (n *nativeTerms) terms(s *Summary, b Batch) Terms {
	rows := b.Decode + b.Prefill
	seqs := b.Decode + b.PrefillSeq
	var t Terms
	if rows <= 0 {
		return t
	}
	lc, lo := n.linear(s.LinearFLOPs, rows, n.calls, n.smallParallel)
	hc, ho := n.linear(s.HeadFLOPs, seqs, 1, n.headParallel)
	pairs, busySeqs := n.attention(b)
	t.Compute = lc + hc + n.attnPerFLOP*s.AttnFLOPs*pairs
	t.Weights = n.weights
	if rows > nativeSmallRows {
		t.Weights += n.pack
	}
	if seqs > nativeSmallRows {
		t.Weights += n.packHead
	}
	elemRows := rows
	if rows > nativeElemSerial {
		elemRows = rows / n.threads
	}
	t.KV = n.perTask * busySeqs
	t.Overhead = n.fixed + lo + ho + n.perElem*elemRows + n.perSeq*seqs
	return t
}

// nativeMemory plans the native engine's memory: the weights at their
// stored width (Summary.StoredBits), a float32 KV cache of reqTokens per sequence for slots sequences (at most
// the sequences in flight, r.natSlots), step
// buffers for the largest step (slots decoders plus the prompt budget),
// the garbage of a run's kernel calls (see NativeCoeffs.MemGarbage), and the process's
// fixed cost. It returns false with rep.Fail set when that exceeds dev.
func nativeMemory(rep *MemoryReport, s *Summary, hwName string, dev float64, r *resolved, c *NativeCoeffs, reqTokens float64, slots int) bool {
	n := float64(max(slots, 1))
	if r.natSlots > 0 {
		// engine.Serve holds a KV cache per sequence in flight, never more
		// than the clients however high the limit.
		n = math.Min(n, float64(r.natSlots))
	}
	perSeq := (s.KVBytes + s.SWAKVBytes) * reqTokens
	kv := perSeq * n
	act := nativeStepBytes(s, n, reqTokens, float64(r.budgetToks), float64(max(c.Threads, 1)))
	// The weights are the checkpoint's tensors, mapped and read in place:
	// every step touches every page, so all of them are resident, at the
	// width they are stored at (MemHeap is 1 in every fit since the rule
	// priced them at float32 and fitted a fraction; see nativecal).
	rep.WeightsBytes = c.MemHeap * s.WeightBytes * storedShare(s)
	rep.KVPoolBytes = c.MemBuffers * kv
	rep.ActivationBytes = c.MemBuffers*act + c.MemWork*n*r.natISL
	garbage := c.MemGarbage * r.natSteps * float64(s.Layers)
	if c.MemGarbageCap > 0 {
		garbage = math.Min(garbage, c.MemGarbageCap*(rep.KVPoolBytes+rep.ActivationBytes))
	}
	rep.OverheadBytes = c.MemFixed + garbage
	rep.KVCapacityTokens = reqTokens * n
	rep.NeededBytes = rep.TotalBytes()
	rep.BudgetBytes = rep.NeededBytes
	rep.MaxConcurrency = int(n)
	rep.InFlight = int(n)
	if per := c.MemBuffers * perSeq; per > 0 {
		rep.MaxConcurrency = int(math.Floor((dev - rep.NeededBytes + c.MemBuffers*kv) / per))
	}
	if rep.NeededBytes > dev {
		rep.fail(hwName, "weights + KV cache + buffers", rep.NeededBytes, dev, r.spec.Hints.KV)
		rep.Fail.Tokens, rep.Fail.Slots = int(reqTokens), int(n)
		return false
	}
	rep.Fits = true
	return true
}

// nativeStepBytes is the native engine's step-buffer memory for slots
// sequences of reqTokens tokens with a prompt budget of budget tokens per
// step and threads attention workers (see engine.Model.Step): per row the
// hidden state, norm and residual buffers, queries, keys, values and
// attention output, and the MLP's gate, up and hidden; a logits row per
// sequence; and one score matrix (chunk × context) per worker.
func nativeStepBytes(s *Summary, slots, reqTokens, budget, threads float64) float64 {
	rows := math.Min(slots+budget, slots*reqTokens)
	perRow := 3*float64(s.Hidden) + 2*float64(s.MaxQDim) + 2*float64(s.MaxKVDim) + 3*float64(s.MaxFFN)
	chunk := math.Min(budget, reqTokens)
	scores := 0.0
	if s.AttnLayers > 0 {
		scores = threads * chunk * reqTokens
	}
	return 4 * (rows*perRow + slots*float64(s.Vocab) + scores)
}

// nativeSlots bounds the slots nativeLoop tracks one by one; beyond
// that each tracked slot stands for slots/nativeSlots identical ones.
const nativeSlots = 64

// nativeQueueLen bounds the entries of nativeLoop's queue of waiting
// requests; past it a new entry merges into the newest (its mean arrival).
const nativeQueueLen = 4 * nativeSlots

// nativeLoop prices a bench-serve run of engine.Serve's closed loop:
// nreq requests of fixed lengths from conc clients, all sending at once,
// each client sending its next request the moment the previous one
// completes until nreq have been sent; at most slots sequences are in
// flight (engine.ServeOptions.MaxBatch) and the other clients' requests
// wait in arrival order, their wait counted in TTFT and E2E; every step
// runs all sequences in flight, decoders one token each and prompts in
// arrival order in chunks of at most budget tokens in all. It follows the
// slots step by step while prompts are pending and jumps over decode-only
// stretches in closed form (a step is affine in its context), and returns
// the means over all requests, as bench-serve reports them, and the run's
// wall time. It does not allocate.
func nativeLoop(m *stepModel, conc, slots int, nreq, isl, osl, budget float64) (ttft, tpot, e2e, wall float64) {
	isl, osl = max(math.Round(isl), 1), max(math.Round(osl), 1)
	conc = max(conc, 1)
	slots = min(max(slots, 1), conc)
	n := min(slots, nativeSlots)
	sz := float64(slots) / float64(n)
	prompt := sz * isl // prompt tokens of one tracked slot
	nreq = max(math.Min(nreq, 64*float64(conc)), float64(conc))
	var arrival, first, fed, gen, wt [nativeSlots]float64
	var idle [nativeSlots]bool
	for i := range n {
		wt[i] = sz
	}
	// The requests waiting for a slot, oldest first: (arrival, requests).
	var qa, qm [nativeQueueLen]float64
	qh, ql := 0, 0 // head index, entries
	if w := float64(conc - slots); w > 0 {
		qa[0], qm[0], ql = 0, w, 1
	}
	t := 0.0
	issued := float64(conc)
	var sumT, sumP, sumE, cnt float64
	complete := func(i int) {
		w := wt[i]
		sumT += w * (first[i] - arrival[i])
		sumE += w * (t - arrival[i])
		if osl > 1 {
			sumP += w * (t - first[i]) / (osl - 1)
		}
		cnt += w
		// The client sends its next request, to the back of the queue.
		if issued+sz <= nreq+1e-9 {
			issued += sz
			if k := (qh + ql - 1) % nativeQueueLen; ql > 0 && (ql == nativeQueueLen || qa[k] == t) {
				qa[k] = (qa[k]*qm[k] + t*sz) / (qm[k] + sz)
				qm[k] += sz
			} else {
				k = (qh + ql) % nativeQueueLen
				qa[k], qm[k] = t, sz
				ql++
			}
		}
		// The slot takes the oldest waiting requests (sz of them, or what
		// is left at the end of the run).
		var a, got float64
		for ql > 0 && got < sz-1e-9 {
			take := math.Min(qm[qh], sz-got)
			a += take * qa[qh]
			got += take
			if qm[qh] -= take; qm[qh] <= 1e-9 {
				qh, ql = (qh+1)%nativeQueueLen, ql-1
			}
		}
		if got <= 1e-9 {
			idle[i] = true
			return
		}
		arrival[i], wt[i], fed[i], gen[i] = a/got, got, 0, 0
	}
	for iter := 0; cnt < nreq-1e-9 && iter < 1<<20; iter++ {
		var b Batch
		pending, busy := false, false
		for i := 0; i < n; i++ {
			switch {
			case idle[i]:
			case fed[i] == prompt:
				b.Decode += sz
				b.DecodeCtx += sz * (isl + gen[i])
				busy = true
			default:
				pending, busy = true, true
			}
		}
		if !busy {
			break
		}
		if !pending {
			// Decode-only stretch until the next completion.
			k := osl
			for i := 0; i < n; i++ {
				if !idle[i] {
					k = min(k, osl-gen[i])
				}
			}
			k = max(k, 1)
			b.DecodeCtx += b.Decode * (k - 1) / 2
			t += k * m.time(b)
			for i := 0; i < n; i++ {
				if idle[i] {
					continue
				}
				gen[i] += k
				if gen[i] >= osl {
					complete(i)
				}
			}
			continue
		}
		// Prompt chunks in arrival order (ties by slot index).
		var chunk [nativeSlots]float64
		room := budget
		for room > 0 {
			j := -1
			for i := 0; i < n; i++ {
				if !idle[i] && fed[i] < prompt && chunk[i] == 0 && (j < 0 || arrival[i] < arrival[j]) {
					j = i
				}
			}
			if j < 0 {
				break
			}
			c := math.Min(room, prompt-fed[j])
			chunk[j] = c
			off := math.Mod(fed[j], isl)
			b.Prefill += c
			b.PrefillAtt += c * (off + (math.Min(c, isl)+1)/2)
			seqs := 1.0
			if sz > 1 {
				seqs = math.Ceil(c / isl)
			}
			b.PrefillSeq += seqs
			if fed[j]+c == prompt {
				b.PrefillDone += sz
			}
			room -= c
		}
		t += m.time(b)
		for i := 0; i < n; i++ {
			switch {
			case idle[i]:
				continue
			case chunk[i] > 0:
				fed[i] += chunk[i]
				if fed[i] < prompt {
					continue
				}
				first[i], gen[i] = t, 1
			case fed[i] == prompt:
				gen[i]++
			default:
				continue
			}
			if gen[i] >= osl {
				complete(i)
			}
		}
	}
	if cnt == 0 {
		return 0, 0, 0, 0
	}
	return sumT / cnt, sumP / cnt, sumE / cnt, t
}

// nativeLatency is the analytic closed-loop latency of the native engine.
func (c *Compiled) nativeLatency(m *stepModel) Latency {
	conc := max(int(c.conc), 1)
	nreq := max(c.nreq, float64(conc))
	slots := conc
	if c.r.natSlots > 0 {
		slots = min(c.r.natSlots, conc)
	}
	ttft, tpot, e2e, wall := nativeLoop(m, conc, slots, nreq, c.isl, c.osl, float64(c.r.budgetToks))
	a0 := c.nat.Alpha0
	var l Latency
	l.TTFT, l.TPOT, l.E2E = ttft+a0, tpot, e2e+a0
	l.TTFTP90, l.TPOTP90, l.E2EP90 = l.TTFT, l.TPOT, l.E2E
	if wall > 0 {
		// As bench-serve counts it: all requests over the run's wall time.
		l.RequestsPerS = math.Min(nreq, 64*float64(conc)) / wall
	}
	l.OutputTokS = l.RequestsPerS * c.osl
	l.PrefillTokS = l.RequestsPerS * c.isl
	if tpot > 0 {
		l.DecodeTokS = 1 / tpot
	}
	l.Running = float64(slots)
	b := Batch{Decode: float64(slots), DecodeCtx: float64(slots) * (c.isl + c.osl/2)}
	l.Step = m.terms(b)
	l.StepTime = l.Step.Total()
	return l
}

// NativeCoeffs returns the native coefficients in use (meaningful for the
// native engine only).
func (c *Compiled) NativeCoeffs() NativeCoeffs { return c.nat }

// SetNativeCoeffs replaces the native coefficients (used by calibration).
func (c *Compiled) SetNativeCoeffs(n NativeCoeffs) { c.nat = n }

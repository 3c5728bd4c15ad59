package groundtruth

// Published llama-bench measurements of llama.cpp on consumer GPUs and
// Apple silicon (testdata/llama_bench.csv, provenance in llama_bench.md).
//
// These rows fit the prompt-processing and decode terms of the
// llamacpp-cuda and llamacpp-metal families (FitLlamaBench, called by
// FitAll) and are scored held out by ValidateLlamaBench: every GPU in turn is
// removed, the family is refitted on the others and the removed GPU's rows
// are predicted. Only held-out predictions are reported as the error.

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

//go:embed testdata/llama_bench.csv
var llamaBenchCSV []byte

// Test kinds of a llama-bench row.
const (
	// BenchPP is prompt processing (llama-bench -p N): N prompt tokens from
	// an empty context, tokens per second.
	BenchPP = "pp"
	// BenchTG is text generation (llama-bench -n N): N tokens decoded one at
	// a time from an empty context, tokens per second.
	BenchTG = "tg"
)

// LongPrompt is the prompt length above which pp rows are reported apart
// and not fitted: the builds measured ran attention without flash
// attention (llama-bench's default then), materialising the F32 score
// matrix of every head, traffic the step model does not price.
const LongPrompt = 1024

// LlamaBenchRow is one published llama-bench figure.
type LlamaBenchRow struct {
	Line      int
	Source    string
	GPU       string // hardware catalog name
	Model     string
	Precision string // GGUF type
	Test      string // BenchPP or BenchTG
	Tokens    int
	TokS      float64
	// Ubatch is llama-bench's -ub (tokens per step, the logical batch
	// -b set to at least as many); 0 when the row ran at the defaults
	// (n_batch 2048, n_ubatch 512). Only the optional ubatch column sets it.
	Ubatch int
	Note   string
}

var llamaBenchColumns = []string{"source_id", "gpu", "model", "precision", "test", "tokens", "tok_s", "note"}

// ReadLlamaBench reads a llama-bench table in the llama_bench.csv schema
// ('#' lines are comments). Every malformed row is an error naming its line.
func ReadLlamaBench(r io.Reader, file string) ([]LlamaBenchRow, error) {
	t, err := readTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require(llamaBenchColumns...); err != nil {
		return nil, err
	}
	out := make([]LlamaBenchRow, 0, len(t.recs))
	for i, rec := range t.recs {
		row := LlamaBenchRow{Line: t.lines[i], Source: t.get(rec, "source_id"), GPU: t.get(rec, "gpu"), Model: t.get(rec, "model"),
			Precision: strings.ToLower(t.get(rec, "precision")), Test: strings.ToLower(t.get(rec, "test")), Note: t.get(rec, "note")}
		var errs []string
		n, err := strconv.Atoi(t.get(rec, "tokens"))
		if err != nil || n < 1 || n > maxLength {
			errs = append(errs, fmt.Sprintf("tokens %q is not a whole number from 1 to %d", t.get(rec, "tokens"), maxLength))
		}
		row.Tokens = n
		v, err := strconv.ParseFloat(t.get(rec, "tok_s"), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Sprintf("tok_s %q is not a positive number", t.get(rec, "tok_s")))
		}
		row.TokS = v
		if u := t.get(rec, "ubatch"); u != "" {
			if n, err := strconv.Atoi(u); err != nil || n < 1 || n > maxLength {
				errs = append(errs, fmt.Sprintf("ubatch %q is not a whole number from 1 to %d", u, maxLength))
			} else {
				row.Ubatch = n
			}
		}
		if row.Test != BenchPP && row.Test != BenchTG {
			errs = append(errs, fmt.Sprintf("test %q is not pp or tg", row.Test))
		}
		if row.Source == "" || row.GPU == "" || row.Model == "" {
			errs = append(errs, "source_id, gpu and model must be named")
		}
		if p, err := estimate.LookupPrecision(row.Precision); err != nil || !p.GGUF {
			errs = append(errs, fmt.Sprintf("precision %q is not a GGUF type", row.Precision))
		}
		if len(errs) > 0 {
			return nil, &ParseError{File: file, Line: t.lines[i], Msg: strings.Join(errs, "; ")}
		}
		out = append(out, row)
	}
	return out, nil
}

// LlamaBenchTables returns the embedded rows (testdata/llama_bench.csv).
func LlamaBenchTables() ([]LlamaBenchRow, error) {
	return ReadLlamaBench(strings.NewReader(string(llamaBenchCSV)), "llama_bench.csv")
}

// benchCase is a row made ready to price: its device, family and summary.
type benchCase struct {
	row *LlamaBenchRow
	hw  *hardware.GPU
	fam string
	c   *estimate.Compiled
	s   estimate.Summary
}

// Fitted reports whether the row takes part in fits: prompt rows up to
// LongPrompt tokens.
func (r *LlamaBenchRow) Fitted() bool { return r.Test == BenchPP && r.Tokens <= LongPrompt }

// prepareBench compiles each row (llama.cpp, one sequence); rows whose GPU
// or model is unknown are an error, since the file is curated.
func prepareBench(rows []LlamaBenchRow) ([]*benchCase, error) {
	return prepareBenchFile(rows, "llama_bench.csv")
}

// prepareBenchFile is prepareBench for rows read from file (named in errors).
func prepareBenchFile(rows []LlamaBenchRow, file string) ([]*benchCase, error) {
	out := make([]*benchCase, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		hw, err := hardware.Lookup(r.GPU)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, r.Line, err)
		}
		m, ok := published.DescribePublished(r.Model)
		if !ok {
			return nil, fmt.Errorf("%s:%d: model %s not described", file, r.Line, r.Model)
		}
		isl, osl := 1, 1
		if r.Test == BenchPP {
			isl = r.Tokens
		} else {
			osl = r.Tokens
		}
		w := workload.FixedClosed(isl, osl, 1)
		o := estimate.Options{Precision: r.Precision, MaxNumSeqs: 1}
		if r.Ubatch > 0 { // every step processes Ubatch prompt tokens
			o.MaxBatchedTokens, o.MicroBatch = r.Ubatch, r.Ubatch
		}
		c, err := estimate.Compile(hw, estimate.LlamaCPP, o, &w, nil)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, r.Line, err)
		}
		b := &benchCase{row: r, hw: hw, fam: estimate.LlamaCPP.Family(hw), c: c}
		c.Summarize(&b.s, m)
		out = append(out, b)
	}
	return out, nil
}

// predict returns the predicted tokens per second of b under co.
func (b *benchCase) predict(co estimate.Coeffs) float64 {
	b.c.SetCoeffs(co)
	pp, tg := 0, 0
	if b.row.Test == BenchPP {
		pp = b.row.Tokens
	} else {
		tg = b.row.Tokens
	}
	p, t := b.c.LlamaBench(&b.s, pp, tg)
	if pp > 0 {
		return p
	}
	return t
}

// benchParams are the coefficients a llama-bench fit moves, with bounds:
// GEMM (1/MFU of prompt GEMMs at the peak GGMLPeak names) and CompLow
// (block-quantized GEMMs relative to F16). The decode terms (Comp on the
// BF16 rate, Layer, Weight, Quant) keep the costmodel.md §5.4 priors: fitted
// on two or three Apple GPUs at a time they did worse held out (Metal decode
// 13.4 % median against 7.6 % for the priors, in a variant that priced
// decode at the GEMM peak too).
var benchParams = []struct {
	name   string
	get    func(*estimate.Coeffs) *float64
	lo, hi float64
}{
	{"gemm", func(c *estimate.Coeffs) *float64 { return &c.GEMM }, 1, 10},
	{"comp_low", func(c *estimate.Coeffs) *float64 { return &c.CompLow }, 0.5, 4},
}

// benchLoss is the mean squared log error of the fitted rows under co:
// prompt processing up to LongPrompt tokens (decode does not depend on the
// fitted terms).
func benchLoss(cases []*benchCase, co estimate.Coeffs) float64 {
	sum, n := 0.0, 0
	for _, b := range cases {
		if !b.row.Fitted() {
			continue
		}
		pred := b.predict(co)
		if !(pred > 0) || math.IsInf(pred, 0) {
			return math.Inf(1)
		}
		e := math.Log(pred / b.row.TokS)
		sum += e * e
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// fitBench fits benchParams of prior on cases (one family) by restarted
// Nelder–Mead on log-coefficients within the bounds. Deterministic.
func fitBench(cases []*benchCase, prior estimate.Coeffs, maxIter int) estimate.Coeffs {
	toCoeffs := func(x []float64) estimate.Coeffs {
		co := prior
		for i, p := range benchParams {
			*p.get(&co) = clamp(math.Exp(x[i]), p.lo, p.hi)
		}
		return co
	}
	if prior.GEMM == 0 { // not fitted before: start from the decode's Comp
		prior.GEMM = prior.Comp
	}
	x := make([]float64, len(benchParams))
	for i, p := range benchParams {
		x[i] = math.Log(clamp(*p.get(&prior), p.lo, p.hi))
	}
	f := func(x []float64) float64 { return benchLoss(cases, toCoeffs(x)) }
	fx := f(x)
	for restart := 0; restart < 3; restart++ {
		nx, nf := nelderMead(f, x, 0.3, maxIter)
		if nf >= fx-1e-12 && restart > 0 {
			break
		}
		x, fx = nx, nf
	}
	co := toCoeffs(x)
	return co
}

// LlamaBenchFamilies are the coefficient families the llama-bench rows fit.
var LlamaBenchFamilies = []string{"llamacpp-cuda", "llamacpp-metal"}

// FitLlamaBench fits the llama-bench terms of each family in
// LlamaBenchFamilies on rows, starting from prior's values, and returns the
// fitted coefficients per family (families without rows are absent).
func FitLlamaBench(rows []LlamaBenchRow, prior *estimate.CoeffFile, maxIter int) (map[string]estimate.Coeffs, error) {
	cases, err := prepareBench(rows)
	if err != nil {
		return nil, err
	}
	out := map[string]estimate.Coeffs{}
	for _, fam := range LlamaBenchFamilies {
		sub := benchFilter(cases, func(b *benchCase) bool { return b.fam == fam })
		if len(sub) == 0 {
			continue
		}
		out[fam] = fitBench(sub, priorFor(prior, fam), maxIter)
	}
	return out, nil
}

func benchFilter(cases []*benchCase, keep func(*benchCase) bool) []*benchCase {
	var out []*benchCase
	for _, b := range cases {
		if keep(b) {
			out = append(out, b)
		}
	}
	return out
}

// LlamaBenchResult is the prediction of one row: with the priors (no fit),
// with the family fitted on every other GPU (held out), and in-sample.
type LlamaBenchResult struct {
	Row                       *LlamaBenchRow
	Family                    string
	Prior, HeldOut, InSample  float64 // predicted tokens per second
	PriorAPE, HeldAPE, FitAPE float64
}

// LlamaBenchCell summarises one group: family ("all" pooled), test kind
// (pp, pp-long for prompts above LongPrompt, tg) and which prediction.
type LlamaBenchCell struct {
	Family string  `json:"family"`
	Test   string  `json:"test"`
	Kind   string  `json:"prediction"` // "prior", "held-out" or "in-sample"
	N      int     `json:"n"`
	Median float64 `json:"median_ape"`
	P90    float64 `json:"p90_ape"`
	Bias   float64 `json:"median_signed"`
}

// LlamaBenchTargets are the goals on held-out rows.
var LlamaBenchTargets = struct{ PP, TG float64 }{PP: 0.15, TG: 0.10}

// ValidateLlamaBench scores rows three ways: with prior (priors.json: no
// GEMM term, every token's linear layers at Comp on the BF16 rate, the
// estimator before the llama-bench fit), held out (for each GPU, the family refitted
// on the other GPUs' rows) and in-sample (fitted on all). Rows of a family
// with a single GPU get no held-out prediction (NaN).
func ValidateLlamaBench(rows []LlamaBenchRow, prior *estimate.CoeffFile, maxIter int) ([]LlamaBenchResult, []LlamaBenchCell, error) {
	cases, err := prepareBench(rows)
	if err != nil {
		return nil, nil, err
	}
	res := make([]LlamaBenchResult, len(cases))
	for i, b := range cases {
		res[i] = LlamaBenchResult{Row: b.row, Family: b.fam, HeldOut: math.NaN(), HeldAPE: math.NaN()}
		pc, _ := prior.Family(b.fam)
		res[i].Prior = b.predict(pc)
	}
	for _, fam := range LlamaBenchFamilies {
		sub := benchFilter(cases, func(b *benchCase) bool { return b.fam == fam })
		if len(sub) == 0 {
			continue
		}
		start := priorFor(prior, fam)
		all := fitBench(sub, start, maxIter)
		gpus := map[string]bool{}
		for _, b := range sub {
			gpus[b.row.GPU] = true
		}
		names := make([]string, 0, len(gpus))
		for g := range gpus {
			names = append(names, g)
		}
		sort.Strings(names)
		held := map[*benchCase]float64{}
		if len(names) > 1 {
			for _, g := range names {
				train := benchFilter(sub, func(b *benchCase) bool { return b.row.GPU != g })
				co := fitBench(train, start, maxIter)
				for _, b := range sub {
					if b.row.GPU == g {
						held[b] = b.predict(co)
					}
				}
			}
		}
		for i, b := range cases {
			if b.fam != fam {
				continue
			}
			res[i].InSample = b.predict(all)
			if v, ok := held[b]; ok {
				res[i].HeldOut = v
			}
		}
	}
	ape := func(pred, meas float64) float64 { return math.Abs(pred-meas) / meas }
	type gk struct{ fam, test, kind string }
	apes, signed := map[gk][]float64{}, map[gk][]float64{}
	for i := range res {
		r := &res[i]
		r.PriorAPE, r.FitAPE = ape(r.Prior, r.Row.TokS), ape(r.InSample, r.Row.TokS)
		if !math.IsNaN(r.HeldOut) {
			r.HeldAPE = ape(r.HeldOut, r.Row.TokS)
		}
		test := r.Row.Test
		if test == BenchPP && r.Row.Tokens > LongPrompt {
			test = "pp-long"
		}
		for _, k := range []struct {
			kind       string
			pred, errv float64
		}{{"prior", r.Prior, r.PriorAPE}, {"held-out", r.HeldOut, r.HeldAPE}, {"in-sample", r.InSample, r.FitAPE}} {
			if math.IsNaN(k.errv) {
				continue
			}
			for _, fam := range []string{r.Family, "all"} {
				key := gk{fam, test, k.kind}
				apes[key] = append(apes[key], k.errv)
				signed[key] = append(signed[key], k.pred/r.Row.TokS-1)
			}
		}
	}
	var cells []LlamaBenchCell
	for k, v := range apes {
		med, p90 := quantiles(v)
		bias, _ := quantiles(signed[k])
		cells = append(cells, LlamaBenchCell{Family: k.fam, Test: k.test, Kind: k.kind, N: len(v), Median: med, P90: p90, Bias: bias})
	}
	sort.Slice(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Test != b.Test {
			return a.Test < b.Test
		}
		return a.Kind < b.Kind
	})
	return res, cells, nil
}

// LlamaBenchCellFor returns the cell of family, test and kind.
func LlamaBenchCellFor(cells []LlamaBenchCell, family, test, kind string) (LlamaBenchCell, error) {
	for _, c := range cells {
		if c.Family == family && c.Test == test && c.Kind == kind {
			return c, nil
		}
	}
	return LlamaBenchCell{}, errors.New("no llama-bench cell " + family + "/" + test + "/" + kind)
}

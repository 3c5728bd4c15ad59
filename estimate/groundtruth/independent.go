package groundtruth

// Independent published serving tables, held out of every fit.
//
// testdata/independent_serving.csv holds measurements transcribed from
// published tables (TensorRT-LLM's performance overview; provenance in
// testdata/independent_serving.md). They are never passed to Fit, FitAll or
// Validate: ScoreIndependent prices each row with the shipped coefficients
// (estimate.Compile with nil coefficients) through the public API and
// reports the absolute percentage error per row and metric.

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

//go:embed testdata/independent_serving.csv
var independentCSV []byte

// consumerCSV holds published serving measurements on consumer GPUs
// (GeForce RTX), in the independent-table format; provenance in
// testdata/consumer_serving.md. Like the independent tables, no fit sees them.
//
//go:embed testdata/consumer_serving.csv
var consumerCSV []byte

// Arrival modes of an independent row.
const (
	// ModeOffline is a max-throughput run with every request queued at
	// time zero (trtllm-bench throughput, request rate INF).
	ModeOffline = "offline"
	// ModeClosed is a closed loop of Concurrency clients.
	ModeClosed = "closed"
	// ModePoisson is Poisson arrivals at RequestRate requests per second.
	ModePoisson = "poisson"
)

// IndependentRow is one published measurement of an independent table.
type IndependentRow struct {
	Line          int // line in the CSV file (1 = header)
	Source        string
	Engine        estimate.Engine
	EngineVersion string
	Model         string
	GPU           string // hardware catalog name
	TP            int
	Precision     string
	KVDType       string
	ISL, OSL      int
	Mode          string // ModeOffline, ModeClosed or ModePoisson
	Concurrency   int    // closed loop only
	RequestRate   float64
	NumRequests   int
	// MemFraction is the engine's KV memory fraction the publication states
	// (TRT-LLM kv_cache_free_gpu_mem_fraction); 0 = engine default.
	MemFraction float64
	// Published values; 0 = not published.
	OutputTokS, TTFTms, TPOTms float64
	Note                       string
}

var independentColumns = []string{"source_id", "engine", "engine_version", "model", "gpu", "tp", "precision", "kv_dtype",
	"isl", "osl", "mode", "concurrency", "request_rate", "num_requests", "output_tok_s", "ttft_ms", "tpot_ms", "note"}

// maxLength bounds the sequence lengths and counts a row may state.
const maxLength = 1 << 24

// ReadIndependent reads an independent-table CSV (columns as in
// independentColumns, plus an optional mem_fraction; lines starting with '#'
// are comments). Any malformed row is an error naming its line: the file is
// curated, so nothing is skipped silently. Rows are not checked against the
// model and GPU catalogs here; ScoreIndependent skips and counts those.
func ReadIndependent(r io.Reader, file string) ([]IndependentRow, error) {
	t, err := readTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require(independentColumns...); err != nil {
		return nil, err
	}
	rows := make([]IndependentRow, 0, len(t.recs))
	for i, rec := range t.recs {
		row, err := independentRow(t, rec)
		if err != nil {
			return nil, &ParseError{File: file, Line: t.lines[i], Msg: err.Error()}
		}
		row.Line = t.lines[i]
		rows = append(rows, row)
	}
	return rows, nil
}

func independentRow(t *table, rec []string) (IndependentRow, error) {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	num := func(col string, integer bool) float64 {
		s := t.get(rec, col)
		if s == "" {
			return 0
		}
		f, err := strconv.ParseFloat(s, 64)
		switch {
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
			bad("%s %q is not a number", col, s)
			return 0
		case f < 0 || f > maxLength*1e3:
			bad("%s %g is out of range", col, f)
			return 0
		case integer && (f != math.Trunc(f) || f > maxLength):
			bad("%s %g is not a whole number up to %d", col, f, maxLength)
			return 0
		}
		return f
	}
	row := IndependentRow{
		Source:        t.get(rec, "source_id"),
		EngineVersion: t.get(rec, "engine_version"),
		Model:         t.get(rec, "model"),
		GPU:           t.get(rec, "gpu"),
		TP:            int(num("tp", true)),
		Precision:     t.get(rec, "precision"),
		KVDType:       t.get(rec, "kv_dtype"),
		ISL:           int(num("isl", true)),
		OSL:           int(num("osl", true)),
		Mode:          strings.ToLower(t.get(rec, "mode")),
		Concurrency:   int(num("concurrency", true)),
		RequestRate:   num("request_rate", false),
		NumRequests:   int(num("num_requests", true)),
		MemFraction:   num("mem_fraction", false),
		OutputTokS:    num("output_tok_s", false),
		TTFTms:        num("ttft_ms", false),
		TPOTms:        num("tpot_ms", false),
		Note:          t.get(rec, "note"),
	}
	if row.Source == "" {
		bad("source_id is empty")
	}
	if e, err := estimate.LookupEngine(t.get(rec, "engine")); err != nil {
		bad("%v", err)
	} else {
		row.Engine = e
	}
	if row.Model == "" || row.GPU == "" {
		bad("model and gpu must be named")
	}
	if row.TP < 1 {
		bad("tp must be ≥ 1")
	}
	if row.ISL < 1 || row.OSL < 1 {
		bad("isl and osl must be ≥ 1")
	}
	if row.MemFraction > 1 {
		bad("mem_fraction %g is above 1", row.MemFraction)
	}
	switch row.Mode {
	case ModeOffline:
		if row.Concurrency != 0 || row.RequestRate != 0 {
			bad("an offline row has no concurrency or request rate")
		}
	case ModeClosed:
		if row.Concurrency < 1 || row.RequestRate != 0 {
			bad("a closed row needs a concurrency ≥ 1 and no request rate")
		}
	case ModePoisson:
		if row.RequestRate <= 0 || row.Concurrency != 0 {
			bad("a poisson row needs a request rate > 0 and no concurrency")
		}
	default:
		bad("mode %q is not offline, closed or poisson", row.Mode)
	}
	if row.OutputTokS == 0 && row.TTFTms == 0 && row.TPOTms == 0 {
		bad("no published output_tok_s, ttft_ms or tpot_ms")
	}
	if len(errs) > 0 {
		return row, errors.New(strings.Join(errs, "; "))
	}
	return row, nil
}

// ReadIndependentFile reads an independent-table CSV from path.
func ReadIndependentFile(path string) ([]IndependentRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("independent tables: %w", err)
	}
	defer f.Close()
	return ReadIndependent(f, path)
}

// IndependentTables returns the rows of the embedded independent tables
// (testdata/independent_serving.csv).
func IndependentTables() ([]IndependentRow, error) {
	return ReadIndependent(strings.NewReader(string(independentCSV)), "independent_serving.csv")
}

// ConsumerTables returns the rows of the embedded consumer-GPU tables
// (testdata/consumer_serving.csv), scored like the independent tables by
// ScoreIndependent: each source is a held-out group, never fitted.
func ConsumerTables() ([]IndependentRow, error) {
	return ReadIndependent(strings.NewReader(string(consumerCSV)), "consumer_serving.csv")
}

// MetricError is the error of one predicted metric against its published value.
type MetricError struct {
	Metric    Metric
	Published float64 // ms for TTFT and TPOT, tokens/s for throughput
	Predicted float64 // +Inf when the estimator predicts an unbounded queue
	// APE is |predicted − published| / published; +Inf when Predicted is.
	APE float64
}

// IndependentResult is the prediction of one row.
type IndependentResult struct {
	Row *IndependentRow
	// Skip is why the row was not priced ("" when it was): an unknown model
	// or GPU, an options error, or "does not fit per the estimator" for a
	// deployment the publication ran.
	Skip string
	// Memory and admission as predicted.
	KVCapacityTokens float64
	MaxConcurrency   int
	Running          float64 // mean requests in service
	// Saturated marks a Poisson row whose rate the estimator's capacity
	// does not reach (TTFT is then +Inf).
	Saturated bool
	// Step is the predicted mean decode step and its breakdown (seconds).
	Step   estimate.Terms
	Errors []MetricError
}

// IndependentCell summarises the APEs of one group of rows and one metric.
type IndependentCell struct {
	Engine string // engine, or "all"
	Source string // source_id, or "all"
	// Class is the deployment class of the rows (RowClass: weight format
	// and dense/MoE), or "" in the per-engine and per-source cells.
	Class  string `json:",omitempty"`
	Metric Metric
	N      int
	Median float64 // median APE (unbounded errors included, as +Inf)
	P90    float64
	// Bias is the median of predicted/published − 1 (signed): negative when
	// the estimator under-predicts.
	Bias      float64
	Unbounded int // errors that are +Inf (predicted saturation)
}

// IndependentSummary is the result of ScoreIndependent over all rows.
type IndependentSummary struct {
	Rows, Priced int
	Skipped      Skipped
	Saturated    int
	// Cells per engine × metric (Source "all"), per source × metric and
	// overall (Engine and Source "all"), sorted.
	Cells []IndependentCell
	// Classes are the cells per deployment class × metric (RowClass;
	// Engine and Source "all"), sorted by class and metric.
	Classes []IndependentCell
}

// RowClass names the deployment class of a row for the error report: its
// weight format (16-bit, W4A16 for AWQ/GPTQ, FP8, FP4, GGUF) and whether
// the model has MoE layers ("W4A16 MoE"). Rows of one class share the
// kernels whose cost the estimator's terms price together.
func RowClass(r *IndependentRow) string {
	format := "16-bit"
	if p, err := estimate.LookupPrecision(r.Precision); err == nil {
		switch {
		case p.GGUF:
			format = "GGUF"
		case p.Compute == "fp4":
			format = "FP4"
		case p.Compute == "fp8":
			format = "FP8"
		case p.LinearBPW < 15:
			format = "W4A16"
		}
	}
	arch := "dense"
	if m, ok := published.DescribePublished(r.Model); ok {
		for _, l := range m.Layers {
			if l.MoE != nil {
				arch = "MoE"
				break
			}
		}
	}
	return format + " " + arch
}

// Cell returns the cell for engine, source and metric ("all" for any).
func (s *IndependentSummary) Cell(engine, source string, m Metric) (IndependentCell, bool) {
	for _, c := range s.Cells {
		if c.Engine == engine && c.Source == source && c.Metric == m {
			return c, true
		}
	}
	return IndependentCell{}, false
}

// ScoreIndependent predicts every row with the shipped coefficients
// (estimate.DefaultCoeffs, through estimate.Compile with nil coefficients)
// and scores it against the published values. Offline rows are priced as
// an offline workload of NumRequests requests (Rate +Inf), Poisson rows at
// their rate, closed rows at their concurrency. Rows that cannot be priced
// are counted in the summary's Skipped by reason.
func ScoreIndependent(rows []IndependentRow) ([]IndependentResult, IndependentSummary) {
	sum := IndependentSummary{Rows: len(rows), Skipped: Skipped{}}
	res := make([]IndependentResult, len(rows))
	type gk struct {
		eng, src string
		m        Metric
	}
	apes := map[gk][]float64{}
	ratios := map[gk][]float64{}
	classAPEs := map[gk][]float64{}
	classRatios := map[gk][]float64{}
	for i := range rows {
		r := &rows[i]
		res[i] = scoreIndependentRow(r)
		if res[i].Skip != "" {
			sum.Skipped.add(res[i].Skip)
			continue
		}
		sum.Priced++
		if res[i].Saturated {
			sum.Saturated++
		}
		class := RowClass(r)
		for _, e := range res[i].Errors {
			for _, k := range []gk{{string(r.Engine), "all", e.Metric}, {"all", r.Source, e.Metric}, {"all", "all", e.Metric}} {
				apes[k] = append(apes[k], e.APE)
				ratios[k] = append(ratios[k], e.Predicted/e.Published-1)
			}
			k := gk{"all", class, e.Metric}
			classAPEs[k] = append(classAPEs[k], e.APE)
			classRatios[k] = append(classRatios[k], e.Predicted/e.Published-1)
		}
	}
	for k, v := range classAPEs {
		c := SummariseAPE(v, classRatios[k])
		c.Engine, c.Source, c.Class, c.Metric = "all", "all", k.src, k.m
		sum.Classes = append(sum.Classes, c)
	}
	sort.Slice(sum.Classes, func(i, j int) bool {
		a, b := sum.Classes[i], sum.Classes[j]
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		return a.Metric < b.Metric
	})
	for k, v := range apes {
		c := SummariseAPE(v, ratios[k])
		c.Engine, c.Source, c.Metric = k.eng, k.src, k.m
		sum.Cells = append(sum.Cells, c)
	}
	sort.Slice(sum.Cells, func(i, j int) bool {
		a, b := sum.Cells[i], sum.Cells[j]
		if a.Engine != b.Engine {
			return a.Engine < b.Engine
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Metric < b.Metric
	})
	return res, sum
}

// SummariseAPE fills a cell's counts and quantiles from absolute errors
// apes and signed ratios predicted/published − 1 (Engine, Source and Metric
// are left for the caller).
func SummariseAPE(apes, ratios []float64) IndependentCell {
	med, p90 := quantiles(apes)
	bias, _ := quantiles(ratios)
	c := IndependentCell{N: len(apes), Median: med, P90: p90, Bias: bias}
	for _, x := range apes {
		if math.IsInf(x, 1) {
			c.Unbounded++
		}
	}
	return c
}

func scoreIndependentRow(r *IndependentRow) IndependentResult {
	return scoreIndependentRowWith(r, nil)
}

// scoreIndependentRowWith prices r with the coefficients co (nil: the
// shipped ones for the row's engine and GPU).
func scoreIndependentRowWith(r *IndependentRow, co *estimate.Coeffs) IndependentResult {
	res := IndependentResult{Row: r}
	hw, err := hardware.Lookup(r.GPU)
	if err != nil {
		res.Skip = "unknown GPU"
		return res
	}
	m, ok := published.DescribePublished(r.Model)
	if !ok {
		res.Skip = "model not described"
		return res
	}
	w := workload.Workload{Input: workload.FixedLength(r.ISL), Output: workload.FixedLength(r.OSL), NumRequests: r.NumRequests}
	switch r.Mode {
	case ModeOffline:
		w.Rate = math.Inf(1)
	case ModePoisson:
		w.Rate = r.RequestRate
	default:
		w.Concurrency = r.Concurrency
	}
	o := estimate.Options{Precision: r.Precision, KVDType: r.KVDType, TP: r.TP, MemFraction: r.MemFraction}
	c, err := estimate.Compile(hw, r.Engine, o, &w, co)
	if err != nil {
		res.Skip = "cannot compile: " + firstWords(err.Error(), 6)
		return res
	}
	p := c.Price(m)
	res.KVCapacityTokens, res.MaxConcurrency = p.KVCapacityTokens, p.MaxConcurrency
	if !p.Fits {
		res.Skip = "does not fit per the estimator"
		return res
	}
	res.Running = p.Running
	res.Saturated = p.Saturated
	res.Step = p.Step
	add := func(metric Metric, pub, pred float64) {
		if pub <= 0 {
			return
		}
		ape := math.Abs(pred-pub) / pub
		res.Errors = append(res.Errors, MetricError{Metric: metric, Published: pub, Predicted: pred, APE: ape})
	}
	add(Throughput, r.OutputTokS, p.OutputTokS)
	add(TTFT, r.TTFTms, p.TTFT*1000)
	add(TPOT, r.TPOTms, p.TPOT*1000)
	return res
}

package groundtruth

import (
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// KVRow is one engine start-up log: the deployment it describes and the KV
// capacity (and, where printed, the KV pool and the loaded weights) the
// engine reported. Zero means "not stated" for every optional field.
type KVRow struct {
	Line          int // 1-based line of the CSV record, for messages
	Engine        estimate.Engine
	EngineVersion string
	// Era tags logs from engine builds whose memory profiling the shipped
	// estimator does not model ("2024": vLLM V0, which profiles
	// max(max_model_len, 2048) tokens without chunked prefill); "" for
	// current builds. Such rows are scored but summarised apart.
	Era       string
	Model     string
	GPU       string
	TP        int
	Precision string
	KVDType   string
	// MemFraction is vLLM gpu_memory_utilization, SGLang mem_fraction_static
	// or TRT-LLM free_gpu_memory_fraction; 0 = the engine default.
	MemFraction float64
	MaxModelLen int
	MaxNumSeqs  int
	// MaxBatchedTokens is the per-step token budget the engine profiled with
	// (vLLM V0 without chunked prefill: max(max_model_len, 2048)).
	MaxBatchedTokens int
	// Reported values; 0 = not in the log.
	ReportedTokens     float64 // vLLM "GPU KV cache size" / blocks × 16, SGLang "#tokens", TRT-LLM "(N)"
	ReportedKVGiB      float64 // vLLM "Available KV cache memory", SGLang K + V size, TRT-LLM "Allocated X GiB"
	ReportedWeightsGiB float64 // vLLM "Model loading took X GiB"
	Source             string
}

// kvColumns are the columns of kv_capacity.csv; engine, model, gpu and
// source are required, the rest may be absent or empty. Other names are
// rejected so that a misspelt setting is not silently ignored.
var kvColumns = []string{"engine", "engine_version", "era", "model", "gpu", "tp", "precision", "kv_dtype",
	"gpu_mem_util", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
	"reported_kv_tokens", "reported_kv_gib", "reported_weights_gib", "source"}

// ReadKVCapacity reads the published start-up logs in the CSV schema of
// testdata/kv_capacity.csv (a header row naming the columns, any order;
// lines starting with '#' are comments). Every row must name an engine, a
// model, a GPU and a source, and report at least one of KV tokens, KV GiB
// or weights GiB. Model and GPU names are not resolved here (see
// ScoreKVCapacity).
func ReadKVCapacity(r io.Reader) ([]KVRow, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	head, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("kv capacity: empty file")
	}
	if err != nil {
		return nil, fmt.Errorf("kv capacity: header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.ToLower(strings.TrimSpace(h))
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("kv capacity: duplicate column %q", h)
		}
		if !slices.Contains(kvColumns, h) {
			return nil, fmt.Errorf("kv capacity: unknown column %q (columns: %s)", h, strings.Join(kvColumns, ", "))
		}
		col[h] = i
	}
	var missing []string
	for _, c := range []string{"engine", "model", "gpu", "source"} {
		if _, ok := col[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("kv capacity: missing columns %s", strings.Join(missing, ", "))
	}
	var rows []KVRow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("kv capacity: %w", err)
		}
		line, _ := cr.FieldPos(0)
		row, err := parseKVRow(rec, col, line)
		if err != nil {
			return nil, fmt.Errorf("kv capacity: line %d: %w", line, err)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, errors.New("kv capacity: no rows")
	}
	return rows, nil
}

func parseKVRow(rec []string, col map[string]int, line int) (KVRow, error) {
	get := func(name string) string {
		i, ok := col[name]
		if !ok || i >= len(rec) {
			return ""
		}
		return strings.TrimSpace(rec[i])
	}
	row := KVRow{Line: line, EngineVersion: get("engine_version"), Era: get("era"), Model: get("model"), GPU: get("gpu"),
		Precision: get("precision"), KVDType: get("kv_dtype"), Source: get("source")}
	eng, err := estimate.LookupEngine(get("engine"))
	if err != nil {
		return row, err
	}
	row.Engine = eng
	if row.Model == "" || row.GPU == "" || row.Source == "" {
		return row, errors.New("model, gpu and source must not be empty")
	}
	ints := []struct {
		name string
		dst  *int
	}{{"tp", &row.TP}, {"max_model_len", &row.MaxModelLen}, {"max_num_seqs", &row.MaxNumSeqs},
		{"max_num_batched_tokens", &row.MaxBatchedTokens}}
	for _, f := range ints {
		s := get(f.name)
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return row, fmt.Errorf("%s %q is not a non-negative integer", f.name, s)
		}
		*f.dst = v
	}
	row.TP = max(row.TP, 1)
	floats := []struct {
		name string
		dst  *float64
	}{{"gpu_mem_util", &row.MemFraction}, {"reported_kv_tokens", &row.ReportedTokens},
		{"reported_kv_gib", &row.ReportedKVGiB}, {"reported_weights_gib", &row.ReportedWeightsGiB}}
	for _, f := range floats {
		s := strings.ReplaceAll(get(f.name), "_", "")
		if s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return row, fmt.Errorf("%s %q is not a non-negative number", f.name, get(f.name))
		}
		*f.dst = v
	}
	if row.MemFraction > 1 {
		return row, fmt.Errorf("gpu_mem_util %g is not in (0, 1]", row.MemFraction)
	}
	if row.ReportedTokens == 0 && row.ReportedKVGiB == 0 && row.ReportedWeightsGiB == 0 {
		return row, errors.New("no reported value (reported_kv_tokens, reported_kv_gib or reported_weights_gib)")
	}
	return row, nil
}

//go:embed testdata/kv_capacity.csv
var publishedKV string

// PublishedKVCapacity returns the published start-up logs shipped with the
// package (testdata/kv_capacity.csv, provenance in kv_capacity.md).
func PublishedKVCapacity() ([]KVRow, error) {
	return ReadKVCapacity(strings.NewReader(publishedKV))
}

// ReadKVCapacityFile reads ReadKVCapacity's format from a file.
func ReadKVCapacityFile(path string) ([]KVRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := ReadKVCapacity(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// KVResult is the comparison of one row with the estimator's memory plan.
type KVResult struct {
	Row KVRow
	// Skip says why the row was not scored ("" when it was).
	Skip string
	// Fits is false when the estimator says the deployment does not start
	// (the engine did start, so that is itself an error); FailTerm names the
	// term that did not fit.
	Fits     bool
	FailTerm string
	// Predicted values (per GPU of the TP group).
	PredTokens, PredKVGiB, PredWeightsGiB float64
	// Absolute percentage errors |pred − reported| / reported; NaN where
	// the log did not report the value.
	TokensAPE, KVGiBAPE, WeightsAPE float64
}

// Primary is the row's headline error: the KV-token APE where the log has
// tokens, else the KV-pool APE (NaN when neither was reported or scored).
func (r *KVResult) Primary() float64 {
	if !math.IsNaN(r.TokensAPE) {
		return r.TokensAPE
	}
	return r.KVGiBAPE
}

// KVStats summarises one metric over the scored rows.
type KVStats struct {
	N                int
	Median, P90, Max float64
}

// KVSummary is the summary of ScoreKVCapacity.
type KVSummary struct {
	// Rows is the number of rows; Scored those not skipped.
	Rows, Scored int
	// Primary pools each row's headline error (tokens, else KV GiB);
	// Current is Primary over the rows of current engine builds (Era "").
	Primary, Current, Tokens, KVGiB, Weights KVStats
	// Within5 and Within20 count rows whose headline error is at most 5 %
	// and 20 %.
	Within5, Within20 int
}

// ScoreKVCapacity plans the memory of every row with the estimator as
// shipped (estimate.Memory, the same plan Compile(…, nil).Price reports as
// KVCapacityTokens) and compares it with what the engine reported. Rows whose
// model or GPU cannot be described, or whose options the estimator rejects,
// are returned with Skip set and left out of the summary.
func ScoreKVCapacity(rows []KVRow) ([]KVResult, KVSummary) {
	out := make([]KVResult, len(rows))
	var prim, cur, tok, kv, wt []float64
	scored := 0
	for i, row := range rows {
		res := KVResult{Row: row, TokensAPE: math.NaN(), KVGiBAPE: math.NaN(), WeightsAPE: math.NaN()}
		res.Skip = scoreKV(&res)
		out[i] = res
		if res.Skip != "" {
			continue
		}
		scored++
		if p := res.Primary(); !math.IsNaN(p) {
			prim = append(prim, p)
			if row.Era == "" {
				cur = append(cur, p)
			}
		}
		for _, a := range []struct {
			v   float64
			dst *[]float64
		}{{res.TokensAPE, &tok}, {res.KVGiBAPE, &kv}, {res.WeightsAPE, &wt}} {
			if !math.IsNaN(a.v) {
				*a.dst = append(*a.dst, a.v)
			}
		}
	}
	s := KVSummary{Rows: len(rows), Scored: scored, Primary: kvStats(prim), Current: kvStats(cur), Tokens: kvStats(tok),
		KVGiB: kvStats(kv), Weights: kvStats(wt)}
	for _, p := range prim {
		if p <= 0.05 {
			s.Within5++
		}
		if p <= 0.20 {
			s.Within20++
		}
	}
	return out, s
}

// scoreKV fills res and returns a skip reason ("" when scored).
func scoreKV(res *KVResult) string {
	row := &res.Row
	m, ok := published.DescribePublished(row.Model)
	if !ok {
		return "model not described"
	}
	hw, err := hardware.Lookup(row.GPU)
	if err != nil {
		return "GPU not in the catalog"
	}
	o := estimate.Options{Precision: row.Precision, KVDType: row.KVDType, TP: row.TP, MaxModelLen: row.MaxModelLen,
		MaxNumSeqs: row.MaxNumSeqs, MaxBatchedTokens: row.MaxBatchedTokens, MemFraction: row.MemFraction}
	rep, err := estimate.Memory(m, hw, row.Engine, o)
	if rep == nil {
		return fmt.Sprintf("estimator rejects the options: %v", err)
	}
	res.Fits = rep.Fits
	if !rep.Fits {
		// The engine did start, so a plan that stops before sizing the
		// pool predicts zero capacity: a 100 % error, not a skip.
		res.FailTerm = rep.Fail.Term
	}
	res.PredWeightsGiB = rep.WeightsBytes / estimate.GiB
	res.PredKVGiB = rep.KVPoolBytes / estimate.GiB
	res.PredTokens = rep.KVCapacityTokens
	res.TokensAPE = ape(res.PredTokens, row.ReportedTokens)
	res.KVGiBAPE = ape(res.PredKVGiB, row.ReportedKVGiB)
	res.WeightsAPE = ape(res.PredWeightsGiB, row.ReportedWeightsGiB)
	return ""
}

func ape(pred, reported float64) float64 {
	if reported <= 0 || math.IsInf(pred, 0) || math.IsNaN(pred) {
		return math.NaN()
	}
	return math.Abs(pred-reported) / reported
}

func kvStats(v []float64) KVStats {
	if len(v) == 0 {
		return KVStats{Median: math.NaN(), P90: math.NaN(), Max: math.NaN()}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return KVStats{N: len(s), Median: quantile(s, 0.5), P90: quantile(s, 0.9), Max: s[len(s)-1]}
}

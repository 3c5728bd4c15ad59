// Package groundtruth reads public serving measurements, maps them to
// architectures, GPUs and engines, fits the estimator's coefficients to them
// and reports held-out errors.
//
// Sources (read from ../shared/data/groundtruth when present; never copied):
//
//   - AIConfigurator's silicon sample (aiconfigurator_silicon_sample.csv):
//     closed-loop aggregated serving, mean TTFT and TPOT per row.
//   - Argonne LLM-Inference-Bench (argonne_all_results.csv): offline static
//     batches, input = output length, total latency; and its Fig. 22 file
//     (batch-16 prefill time = TTFT).
//   - A user's own measurements in the CSV schema of ReadUser.
//
// Rows whose model, GPU or layout cannot be described are skipped and
// counted by reason (Skipped). Two provenance rules of the silicon sample's
// README also drop rows, never the estimator's error: runs whose
// silicon_data_source says wip=True (work in progress), and runs whose
// benchmarked client concurrency (silicon_concurrency) differs from
// batch_size without attention data parallelism — several replicas behind
// one endpoint, whose per-engine load is not recorded.
package groundtruth

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
)

// Row is one measurement.
type Row struct {
	Source string // "aic", "argonne", "argonne-ttft", or the user file name
	// Era tags rows from old engine builds that get their own coefficient
	// family ("2024" for Argonne: vLLM 0.5/0.6, TRT-LLM 0.11/0.12, llama.cpp
	// 2024-09); "" for current builds.
	Era           string
	ID            string
	Engine        estimate.Engine
	EngineVersion string
	// Measured is when the row was measured, as its source says: a date
	// (AIConfigurator's measured=), a year (Argonne's 2024 runs), or ""
	// when the source does not say.
	Measured string
	Model    string
	// Arch is the model's architecture when the row names a config file or
	// checkpoint directory (user rows); nil = published.Describe(Model).
	Arch      *architecture.Model
	GPU       string // hardware catalog name
	Precision string
	KVDType   string
	TP        int
	ISL, OSL  int
	// Concurrency is the closed-loop client count (0 for static batches).
	Concurrency int
	// Batch is the static batch size of an offline run (Argonne); Budget its
	// prefill chunk (llama.cpp n_batch), 0 = engine default.
	Batch, Budget int

	// Measured values; 0 = not measured.
	TTFTms, TPOTms float64
	LatencyS       float64 // static batch: whole-batch latency
	OutputTokS     float64 // output tokens per second (server)
}

// Static reports whether the row is an offline static batch.
func (r *Row) Static() bool { return r.Batch > 0 }

// Skipped counts rows left out, by reason.
type Skipped map[string]int

func (s Skipped) add(reason string) { s[reason]++ }

// String lists the reasons, most frequent first.
func (s Skipped) String() string {
	type kv struct {
		k string
		v int
	}
	var l []kv
	tot := 0
	for k, v := range s {
		l = append(l, kv{k, v})
		tot += v
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows skipped", tot)
	for _, e := range l {
		fmt.Fprintf(&b, "; %d %s", e.v, e.k)
	}
	return b.String()
}

// ParseError reports a malformed measurement file.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// maxRows caps how many rows a measurement file may have.
const maxRows = 1 << 20

type table struct {
	file  string
	cols  map[string]int
	recs  [][]string
	lines []int // file line of each record
}

// readTable reads a CSV file with a header row (column names matched
// case-insensitively); lines starting with '#' are comments.
func readTable(r io.Reader, file string) (*table, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{File: file, Line: 1, Msg: "empty file (expected a header line)"}
		}
		return nil, &ParseError{File: file, Line: 1, Msg: err.Error()}
	}
	t := &table{file: file, cols: map[string]int{}}
	for i, h := range header {
		t.cols[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line := len(t.recs) + 2
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.Line
				err = pe.Err
			}
			return nil, &ParseError{File: file, Line: line, Msg: err.Error()}
		}
		if len(t.recs) >= maxRows {
			return nil, &ParseError{File: file, Line: len(t.recs) + 2, Msg: fmt.Sprintf("more than %d rows", maxRows)}
		}
		line, _ := cr.FieldPos(0)
		t.recs = append(t.recs, rec)
		t.lines = append(t.lines, line)
	}
	return t, nil
}

func (t *table) get(rec []string, col string) string {
	i, ok := t.cols[col]
	if !ok || i >= len(rec) {
		return ""
	}
	return strings.TrimSpace(rec[i])
}

func (t *table) require(cols ...string) error {
	var miss []string
	for _, c := range cols {
		if _, ok := t.cols[c]; !ok {
			miss = append(miss, c)
		}
	}
	if len(miss) > 0 {
		return &ParseError{File: t.file, Line: 1, Msg: "missing columns: " + strings.Join(miss, ", ")}
	}
	return nil
}

func atoi(s string) int {
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e9 {
		return -1
	}
	return int(f)
}

func atof(s string) float64 {
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return -1
	}
	return f
}

var aicSystems = map[string]string{
	"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300",
	"gb200": "gb200", "gb300": "gb300", "a100_sxm": "a100-80gb", "l40s": "l40s", "l4": "l4", "h100_pcie": "h100-pcie",
}

// ReadAIC reads AIConfigurator's silicon sample. Only aggregated rows
// without pipeline or attention data parallelism are kept; concurrency is
// batch_size (per replica).
func ReadAIC(r io.Reader, file string, skipped Skipped) ([]Row, error) {
	t, err := readTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require("backend", "model_path", "system", "mode", "isl", "osl", "batch_size", "tp_size", "silicon_ttft_ms", "silicon_tpot_ms"); err != nil {
		return nil, err
	}
	var out []Row
	for _, rec := range t.recs {
		if t.get(rec, "mode") != "agg" {
			skipped.add("disaggregated (aic)")
			continue
		}
		src := t.get(rec, "silicon_data_source")
		if hasItem(src, "wip=True") {
			// Provenance marks the run as work in progress.
			skipped.add("marked wip=True (aic)")
			continue
		}
		model := t.get(rec, "model_path")
		if _, ok := published.Describe(model); !ok {
			skipped.add("model not described (aic)")
			continue
		}
		gpu, ok := aicSystems[t.get(rec, "system")]
		if !ok {
			skipped.add("unknown system (aic)")
			continue
		}
		eng, err := estimate.LookupEngine(t.get(rec, "backend"))
		if err != nil {
			skipped.add("unknown backend (aic)")
			continue
		}
		if pp := atoi(t.get(rec, "pp_size")); pp > 1 {
			skipped.add("pipeline parallel (aic)")
			continue
		}
		if dp := atoi(t.get(rec, "attention_dp_size")); dp > 1 {
			skipped.add("attention data parallel (aic)")
			continue
		}
		prec := ""
		switch q := t.get(rec, "gemm_quant_mode"); q {
		case "fp8_block":
			prec = "fp8-block"
		case "fp8":
			prec = "fp8"
			if blockFP8[model] {
				prec = "fp8-block"
			}
		case "nvfp4":
			prec = "nvfp4"
		case "int4_wo":
			prec = "int4-awq"
		case "":
			switch t.get(rec, "precision") {
			case "fp8":
				prec = "fp8"
				if blockFP8[model] {
					prec = "fp8-block"
				}
			case "fp4":
				prec = "nvfp4"
			default:
				prec = "bf16"
			}
		default:
			skipped.add("unknown quant mode (aic)")
			continue
		}
		if prec == "nvfp4" && strings.Contains(model, "gpt-oss") {
			prec = "mxfp4" // gpt-oss ships MXFP4 experts
		}
		kv := "auto"
		if eng == estimate.TRTLLM && prec != "bf16" {
			kv = "fp8" // TRT-LLM quantized checkpoints carry kv_cache_quant_algo FP8
		}
		row := Row{Source: "aic", ID: t.get(rec, "id"), Engine: eng, EngineVersion: t.get(rec, "backend_version"),
			Model: model, GPU: gpu, Precision: prec, KVDType: kv,
			TP: atoi(t.get(rec, "tp_size")), ISL: atoi(t.get(rec, "isl")), OSL: atoi(t.get(rec, "osl")),
			Concurrency: atoi(t.get(rec, "batch_size")),
			TTFTms:      atof(t.get(rec, "silicon_ttft_ms")), TPOTms: atof(t.get(rec, "silicon_tpot_ms"))}
		if row.TP < 1 || row.ISL < 1 || row.OSL < 1 || row.Concurrency < 1 || row.TTFTms <= 0 || row.TPOTms <= 0 {
			skipped.add("invalid numbers (aic)")
			continue
		}
		if d, ok := itemValue(src, "measured"); ok && len(d) >= len("2006-01-02") {
			row.Measured = d[:len("2006-01-02")]
		}
		if sc, ok := itemValue(src, "silicon_concurrency"); ok && atoi(sc) != row.Concurrency {
			// Several replicas behind one endpoint: the per-engine load is
			// not batch_size and the split is not recorded.
			skipped.add("client concurrency is not batch_size: several replicas (aic)")
			continue
		}
		// Throughput implied by the closed loop: N·osl / E2E.
		e2e := row.TTFTms + float64(row.OSL-1)*row.TPOTms
		row.OutputTokS = float64(row.Concurrency*row.OSL) / (e2e / 1000)
		out = append(out, row)
	}
	return out, nil
}

// blockFP8 lists FP8 checkpoints whose config.json quantization_config has
// weight_block_size [128, 128]: whatever the row's quant-mode label says,
// the engine loads them as block-scaled FP8.
var blockFP8 = map[string]bool{
	"Qwen/Qwen3-235B-A22B-FP8": true,
	"MiniMaxAI/MiniMax-M2.5":   true,
}

// hasItem reports whether the ;-separated provenance list src holds item.
func hasItem(src, item string) bool {
	for _, it := range strings.Split(src, ";") {
		if strings.TrimSpace(it) == item {
			return true
		}
	}
	return false
}

// itemValue returns the value of key=value in the ;-separated list src.
func itemValue(src, key string) (string, bool) {
	for _, it := range strings.Split(src, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(it), "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

var argonneGPUs = map[string]string{
	"Nvidia A100 GPU":  "a100-40gb",
	"Nvidia H100 GPU":  "h100-sxm",
	"Nvidia GH200 GPU": "gh200",
}

var argonneEngines = map[string]estimate.Engine{
	"vLLM": estimate.VLLM, "TensorRT-LLM": estimate.TRTLLM, "llama.cpp": estimate.LlamaCPP,
}

// argonneVersions are the engine versions of Argonne's 2024 runs.
var argonneVersions = map[estimate.Engine]string{
	estimate.VLLM: "0.5/0.6 (2024)", estimate.TRTLLM: "0.11/0.12", estimate.LlamaCPP: "git 2024-09",
}

// ReadArgonne reads Argonne's All_results.csv: static batches with input =
// output length. llama.cpp rows are one sequence whose "batch size" is the
// prompt chunk (n_batch).
func ReadArgonne(r io.Reader, file string, skipped Skipped) ([]Row, error) {
	t, err := readTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require("hardware", "num of hardware", "framework", "model", "input output length", "batch size", "latency"); err != nil {
		return nil, err
	}
	var out []Row
	for _, rec := range t.recs {
		row, ok := argonneRow(t, rec, skipped)
		if !ok {
			continue
		}
		row.LatencyS = atof(t.get(rec, "latency"))
		if row.LatencyS <= 0 {
			skipped.add("invalid numbers (argonne)")
			continue
		}
		if row.Engine == estimate.LlamaCPP {
			row.Budget, row.Batch = row.Batch, 1
		}
		row.OutputTokS = float64(row.Batch*row.OSL) / row.LatencyS
		out = append(out, row)
	}
	return out, nil
}

func argonneRow(t *table, rec []string, skipped Skipped) (Row, bool) {
	gpu, ok := argonneGPUs[t.get(rec, "hardware")]
	if !ok {
		skipped.add("non-NVIDIA or unknown hardware (argonne)")
		return Row{}, false
	}
	eng, ok := argonneEngines[t.get(rec, "framework")]
	if !ok {
		skipped.add("framework not modelled (argonne)")
		return Row{}, false
	}
	model := t.get(rec, "model")
	if _, ok := published.Describe(model); !ok {
		skipped.add("model not described (argonne)")
		return Row{}, false
	}
	n := atoi(t.get(rec, "input output length"))
	if n <= 0 {
		n = atoi(t.get(rec, "input length"))
	}
	osl := n
	if o := t.get(rec, "output length"); o != "" {
		osl = atoi(o)
	}
	row := Row{Source: "argonne", Era: "2024", Measured: "2024", Engine: eng, Model: model, GPU: gpu, TP: atoi(t.get(rec, "num of hardware")),
		ISL: n, OSL: osl, Batch: atoi(t.get(rec, "batch size")), Precision: "fp16", KVDType: "auto"}
	if eng == estimate.LlamaCPP {
		row.Precision = "f16"
		if row.TP > 1 {
			skipped.add("llama.cpp multi-GPU layer split (argonne)")
			return Row{}, false
		}
	}
	row.EngineVersion = argonneVersions[eng]
	if row.TP < 1 || row.ISL < 1 || row.OSL < 1 || row.Batch < 1 {
		skipped.add("invalid numbers (argonne)")
		return Row{}, false
	}
	return row, true
}

// ReadArgonneTTFT reads Argonne's Fig. 22 file: batch-16 prefill of
// 1024-token prompts with one output token; TTFT is the batch's time.
func ReadArgonneTTFT(r io.Reader, file string, skipped Skipped) ([]Row, error) {
	t, err := readTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require("hardware", "framework", "model", "input length", "batch size", "ttft latency"); err != nil {
		return nil, err
	}
	var out []Row
	for _, rec := range t.recs {
		if len(rec) < 2 || strings.TrimSpace(strings.Join(rec, "")) == "" {
			continue
		}
		if t.get(rec, "num of hardware") == "" {
			rec = append(rec[:1:1], append([]string{"1"}, rec[1:]...)...)
		}
		row, ok := argonneRow(t, rec, skipped)
		if !ok {
			continue
		}
		row.Source = "argonne-ttft"
		row.OSL = 1
		row.TTFTms = atof(t.get(rec, "ttft latency")) * 1000
		if row.TTFTms <= 0 || row.Engine == estimate.LlamaCPP {
			skipped.add("invalid numbers (argonne-ttft)")
			continue
		}
		out = append(out, row)
	}
	return out, nil
}

// UserColumns is the schema of a user's benchmark file. Header names are
// case-insensitive; metric columns may be empty but at least one must be set.
var UserColumns = []string{"engine", "gpu", "model", "precision", "kv_dtype", "tp", "isl", "osl", "concurrency", "ttft_ms", "tpot_ms", "output_tok_s"}

// ReadUser reads measurements in the UserColumns schema (extra columns are
// ignored). model is a model id that DescribePublished knows, or a
// config.json path or checkpoint directory (a relative path is tried from
// the working directory, then from file's directory), read with
// architecture.Load: a child the search produced is as good as a published
// model. A path that exists but does not load is an error naming the line;
// an id nothing resolves is skipped and counted. gpu is a hardware catalog
// name.
func ReadUser(r io.Reader, file string, skipped Skipped) ([]Row, error) {
	t, err := readTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require("engine", "gpu", "model", "isl", "osl", "concurrency"); err != nil {
		return nil, err
	}
	var out []Row
	for i, rec := range t.recs {
		line := i + 2
		eng, err := estimate.LookupEngine(t.get(rec, "engine"))
		if err != nil {
			return nil, &ParseError{File: file, Line: line, Msg: err.Error()}
		}
		row := Row{Source: file, Engine: eng, GPU: t.get(rec, "gpu"), Model: t.get(rec, "model"),
			Precision: t.get(rec, "precision"), KVDType: t.get(rec, "kv_dtype"), TP: max(atoi(t.get(rec, "tp")), 1),
			ISL: atoi(t.get(rec, "isl")), OSL: atoi(t.get(rec, "osl")), Concurrency: atoi(t.get(rec, "concurrency")),
			TTFTms: atof(t.get(rec, "ttft_ms")), TPOTms: atof(t.get(rec, "tpot_ms")), OutputTokS: atof(t.get(rec, "output_tok_s"))}
		if row.ISL < 1 || row.OSL < 1 || row.Concurrency < 1 {
			return nil, &ParseError{File: file, Line: line, Msg: "isl, osl and concurrency must be positive integers"}
		}
		if row.TTFTms < 0 || row.TPOTms < 0 || row.OutputTokS < 0 {
			return nil, &ParseError{File: file, Line: line, Msg: "ttft_ms, tpot_ms and output_tok_s must be non-negative numbers"}
		}
		if row.TTFTms == 0 && row.TPOTms == 0 && row.OutputTokS == 0 {
			return nil, &ParseError{File: file, Line: line, Msg: "no measurement: set ttft_ms, tpot_ms or output_tok_s"}
		}
		m, err := userModel(row.Model, file)
		if err != nil {
			return nil, &ParseError{File: file, Line: line, Msg: err.Error()}
		}
		if m == nil {
			skipped.add("model not described (" + file + ")")
			continue
		}
		row.Arch = m
		out = append(out, row)
	}
	return out, nil
}

// userModel resolves a user row's model: a published id, else a config
// file or checkpoint directory. It returns nil, nil when the id is neither.
func userModel(model, file string) (*architecture.Model, error) {
	if model == "" {
		return nil, errors.New("model is empty")
	}
	if m, ok := published.DescribePublished(model); ok {
		return m, nil
	}
	paths := []string{model}
	if !filepath.IsAbs(model) && file != "" {
		paths = append(paths, filepath.Join(filepath.Dir(file), model))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		m, err := architecture.Load(p)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", model, err)
		}
		m.Name = model
		return m, nil
	}
	return nil, nil
}

// LoadShared reads the three public sets from dir (the groundtruth folder).
func LoadShared(dir string) ([]Row, Skipped, error) {
	skipped := Skipped{}
	var all []Row
	for _, f := range []struct {
		name string
		read func(io.Reader, string, Skipped) ([]Row, error)
	}{
		{"aiconfigurator_silicon_sample.csv", ReadAIC},
		{"argonne_all_results.csv", ReadArgonne},
		{"argonne_fig22_all_results_TTFT_ITL.csv", ReadArgonneTTFT},
	} {
		p := dir + "/" + f.name
		fh, err := os.Open(p)
		if err != nil {
			return nil, nil, fmt.Errorf("ground truth: %w", err)
		}
		rows, err := f.read(fh, p, skipped)
		fh.Close()
		if err != nil {
			return nil, nil, err
		}
		all = append(all, rows...)
	}
	return all, skipped, nil
}

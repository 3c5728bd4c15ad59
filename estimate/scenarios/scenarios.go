// Package scenarios prices a CSV file of deployments, one result row per
// scenario: the batch mode of "autocompress estimate --scenarios", also used
// by validate-estimator to price published tables.
//
// Each input row names a model (a preset, a config.json, a checkpoint
// directory or "parent", resolved by package modelref), a GPU of the catalog,
// an engine and a workload (isl, osl, and concurrency or request_rate), and
// optionally the engine settings the estimate flags of the same names set.
// A bad row (a value out of range, fewer or more fields than the header)
// gets an error value in the error column naming it; the others still come
// out. A malformed file is an error naming its line: no header, a missing,
// unknown or repeated column (an unknown one names the closest known
// column: a misspelled optional column would otherwise be ignored), or
// text that is not CSV (an unterminated quote).
package scenarios

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/suggest"
	"github.com/autocompress/autocompress/modelref"
	"github.com/autocompress/autocompress/workload"
)

// In lists the input columns; id, model, gpu, engine, isl and osl are
// required, the others optional (empty means the default).
var In = []string{"id", "model", "gpu", "engine", "precision", "tp", "isl", "osl", "concurrency", "request_rate", "num_requests",
	"kv_dtype", "mem_fraction", "max_num_seqs", "max_batched_tokens", "context", "gpus"}

// Out lists the output columns, one row per scenario; error is empty for a
// row that was priced.
var Out = []string{"id", "fits", "weights_gib", "kv_gib", "overhead_gib", "total_gib", "kv_capacity_tokens", "max_concurrency",
	"ttft_ms", "tpot_ms", "e2e_ms", "output_tok_s", "prefill_tok_s", "decode_tok_s", "error"}

// MaxRows caps the rows of a scenario file.
const MaxRows = 1 << 20

// MaxGPUs bounds the tp and gpus columns (the estimate flags' bound).
const MaxGPUs = 1 << 10

// Run reads scenario rows from r and writes one result row per scenario to
// w, priced with the devices of cat and the coefficients of cf (nil: the
// embedded ones); the analytic figures, simulated only without
// analyticOnly. It returns the rows written and how many carry an error.
func Run(ctx context.Context, r io.Reader, w io.Writer, cat *hardware.Catalog, cf *estimate.CoeffFile, analyticOnly bool) (rows, bad int, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // every record has the header's fields
	header, err := cr.Read()
	if err != nil {
		return 0, 0, fmt.Errorf("reading the header: %w", err)
	}
	col, err := columns(header)
	if err != nil {
		return 0, 0, err
	}
	var miss []string
	for _, c := range []string{"id", "model", "gpu", "engine", "isl", "osl"} {
		if _, ok := col[c]; !ok {
			miss = append(miss, c)
		}
	}
	if len(miss) > 0 {
		return 0, 0, fmt.Errorf("missing columns %s (want %s)", strings.Join(miss, ", "), strings.Join(In, ","))
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(Out); err != nil {
		return 0, 0, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return rows, bad, err
		}
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if rows >= MaxRows {
			return rows, bad, fmt.Errorf("more than %d scenarios", MaxRows)
		}
		var out []string
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe) && errors.Is(err, csv.ErrFieldCount):
			// The record is whole but its fields do not line up with the
			// header: name its line rather than price shifted columns.
			id := row{rec, col}.get("id")
			if id == "" {
				id = fmt.Sprintf("line %d", pe.StartLine)
			}
			out = rowError(id, fmt.Sprintf("line %d: %d fields, but the header has %d columns", pe.StartLine, len(rec), len(header)))
		case err != nil:
			// Not CSV (an unterminated quote, a stray quote): what follows
			// cannot be read reliably.
			return rows, bad, fmt.Errorf("not a valid CSV file: %w", err)
		default:
			out = price(row{rec, col}, cat, cf, analyticOnly)
		}
		if out[len(out)-1] != "" {
			bad++
		}
		if err := cw.Write(out); err != nil {
			return rows, bad, err
		}
		rows++
	}
	cw.Flush()
	return rows, bad, cw.Error()
}

// columns maps the header's column names to their positions; an empty,
// repeated or unknown name is an error (an unknown one names the closest
// of In).
func columns(header []string) (map[string]int, error) {
	col := map[string]int{}
	var errs []string
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte-order mark
		}
		name := strings.ToLower(strings.TrimSpace(h))
		switch _, dup := col[name]; {
		case name == "":
			errs = append(errs, fmt.Sprintf("column %d has no name", i+1))
		case dup:
			errs = append(errs, fmt.Sprintf("column %q appears twice", name))
		case !slices.Contains(In, name):
			errs = append(errs, suggest.Unknown("column", name, In))
		}
		col[name] = i
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("line 1 (the header): %s; the columns are %s", strings.Join(errs, "; "), strings.Join(In, ","))
	}
	return col, nil
}

func rowError(id, msg string) []string {
	out := make([]string, len(Out))
	out[0], out[1], out[len(out)-1] = id, "false", msg
	return out
}

// row is one input record with the header's column positions.
type row struct {
	rec []string
	col map[string]int
}

// get returns column c, trimmed; "" when the column or the field is absent.
func (r row) get(c string) string {
	if i, ok := r.col[c]; ok && i < len(r.rec) {
		return strings.TrimSpace(r.rec[i])
	}
	return ""
}

// num returns column c as an integer, def when it is empty.
func (r row) num(c string, def int) (int, error) {
	s := r.get(c)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", c, s)
	}
	return v, nil
}

func price(r row, cat *hardware.Catalog, cf *estimate.CoeffFile, analyticOnly bool) []string {
	id := r.get("id")
	fail := func(err error) []string { return rowError(id, err.Error()) }
	node, err := cat.LookupNode(r.get("gpu"), 0)
	if err != nil {
		return fail(err)
	}
	eng, err := estimate.LookupEngine(r.get("engine"))
	if err != nil {
		return fail(err)
	}
	ref, err := modelref.Resolve(r.get("model"))
	if err != nil {
		return fail(fmt.Errorf("model: %w", err))
	}
	m, err := ref.Arch()
	if err != nil {
		return fail(fmt.Errorf("model: %w", err))
	}
	var tp, isl, osl, conc, nreq int
	for _, c := range []struct {
		col string
		dst *int
		def int
	}{{"tp", &tp, 1}, {"isl", &isl, 0}, {"osl", &osl, 0}, {"concurrency", &conc, 0}, {"num_requests", &nreq, 0}} {
		if *c.dst, err = r.num(c.col, c.def); err != nil {
			return fail(err)
		}
	}
	rate, err := workload.ParseRate(r.get("request_rate"))
	if err != nil {
		return fail(err)
	}
	if rate > 0 {
		conc = 0
	} else if conc == 0 {
		conc = 1
	}
	w := workload.Workload{Input: workload.FixedLength(isl), Output: workload.FixedLength(osl), Concurrency: conc, Rate: rate, NumRequests: nreq, Seed: 1}
	if err := w.Validate(); err != nil {
		return fail(err)
	}
	if tp < 1 || tp > MaxGPUs {
		return fail(fmt.Errorf("tp must be from 1 to %d, got %d", MaxGPUs, tp))
	}
	if _, err := w.FitContext(workload.ContextRule{MaxPositions: m.MaxPositions, What: fmt.Sprintf("isl %d + osl %d", isl, osl)}); err != nil {
		return fail(err)
	}
	o, err := settings(r, tp)
	if err != nil {
		return fail(err)
	}
	o.Precision = r.get("precision")
	if o.GPUs == 0 {
		o.GPUs = node.Count
	}
	if o.MaxModelLen > 0 {
		w.ContextLimit = o.MaxModelLen // as --context: the server's limit and the workload's
		if err := w.Validate(); err != nil {
			return fail(fmt.Errorf("context: %w", err))
		}
	}
	res, err := estimate.EstimateWith(m, node.GPU, eng, o, &w, cf, analyticOnly)
	if err != nil {
		out := fail(err)
		if res != nil {
			out[2] = FormatFloat(gib(res.Memory.WeightsBytes), 3)
		}
		return out
	}
	mem, l := &res.Memory, res.Analytic
	return []string{id, "true", FormatFloat(gib(mem.WeightsBytes), 3), FormatFloat(gib(mem.KVPoolBytes), 3),
		FormatFloat(gib(mem.ActivationBytes+mem.OverheadBytes), 3), FormatFloat(gib(mem.TotalBytes()), 3),
		FormatTokens(mem.KVCapacityTokens), strconv.Itoa(mem.MaxConcurrency),
		FormatFloat(l.TTFT*1e3, 2), FormatFloat(l.TPOT*1e3, 3), FormatFloat(l.E2E*1e3, 1), FormatFloat(l.OutputTokS, 1),
		FormatFloat(l.PrefillTokS, 1), FormatFloat(l.DecodeTokS, 2), ""}
}

// settings reads a row's optional engine settings, each meaning what the
// estimate flag of that name means: kv_dtype (--kv-dtype), mem_fraction
// (--mem-fraction), max_num_seqs (--max-num-seqs), max_batched_tokens
// (--max-batched-tokens), context (--context). Empty is the engine's
// default. gpus is the node's GPU count (--gpus; at least tp).
func settings(r row, tp int) (estimate.Options, error) {
	o := estimate.Options{TP: tp, KVDType: r.get("kv_dtype")}
	if _, err := estimate.LookupKVType(o.KVDType); err != nil {
		return o, fmt.Errorf("kv_dtype: %w", err)
	}
	if s := r.get("mem_fraction"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return o, fmt.Errorf("mem_fraction: %q must be a number in (0, 1]", s)
		}
		o.MemFraction = f
	}
	for _, c := range []struct {
		col string
		dst *int
		max int
	}{{"max_num_seqs", &o.MaxNumSeqs, workload.MaxConcurrency}, {"max_batched_tokens", &o.MaxBatchedTokens, workload.MaxTokens}, {"context", &o.MaxModelLen, workload.MaxTokens}} {
		v, err := r.num(c.col, 0)
		if err != nil {
			return o, err
		}
		if v < 0 || v > c.max || (v == 0 && r.get(c.col) != "") {
			return o, fmt.Errorf("%s: must be an integer from 1 to %d (empty = the engine's default), got %d", c.col, c.max, v)
		}
		*c.dst = v
	}
	gpus, err := r.num("gpus", 0)
	if err != nil {
		return o, err
	}
	if r.get("gpus") != "" {
		if gpus > MaxGPUs {
			return o, fmt.Errorf("gpus: %d GPUs per node, more than %d", gpus, MaxGPUs)
		}
		if gpus < tp {
			return o, fmt.Errorf("gpus: %d GPUs per node cannot hold tp %d", gpus, tp)
		}
		o.GPUs = gpus // as --gpus: the node's GPU count (tp ≤ gpus)
	}
	return o, nil
}

func gib(b float64) float64 { return b / estimate.GiB }

// FormatFloat writes x with prec decimals, "inf" for an infinite or NaN
// value: the number format of the output columns.
func FormatFloat(x float64, prec int) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return "inf"
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}

// FormatTokens writes a KV capacity in tokens; an engine without a KV cache
// has an unlimited one.
func FormatTokens(t float64) string {
	if math.IsInf(t, 1) {
		return "unlimited (no KV)"
	}
	return strconv.FormatFloat(t, 'f', 0, 64)
}

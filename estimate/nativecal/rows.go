package nativecal

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/servebench"
)

// Row is one measured point: bench-serve's medians over its runs.
type Row struct {
	Point
	TTFT, TPOT, E2E float64 // seconds, means per run, median over runs
	OutputTPS       float64 // output tokens per second
	PeakRSSBytes    int64   // VmHWM of the measuring process (0: not measured)
	// Noise and load: relative spread (max−min)/median of TTFT and TPOT
	// over the runs, the median CPU share of the threads, and the sgemm
	// rate measured just before the point.
	TTFTSpread, TPOTSpread, CPUShare float64
	SgemmFLOPS                       float64
}

func rowOf(p Point, rep *servebench.Report, rate float64) Row {
	s := rep.Summary
	return Row{Point: p, TTFT: s["ttft_mean_s"].Median, TPOT: s["tpot_mean_s"].Median, E2E: s["e2e_mean_s"].Median,
		OutputTPS: s["output_tokens_per_s"].Median, PeakRSSBytes: rep.PeakRSSBytes,
		TTFTSpread: s["ttft_mean_s"].Spread, TPOTSpread: s["tpot_mean_s"].Spread,
		CPUShare:   servebench.SpreadOf(rep.Runs, func(r servebench.RunStats) float64 { return r.CPUShare }).Median,
		SgemmFLOPS: rate}
}

var header = []string{"name", "set", "shape", "isl", "osl", "concurrency", "requests", "ttft_s", "tpot_s", "e2e_s",
	"output_tok_s", "peak_rss_bytes", "ttft_spread", "tpot_spread", "cpu_share", "sgemm_flops"}

// WriteRows writes rows as CSV with a header.
func WriteRows(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, r := range rows {
		set := "fit"
		if r.HeldOut {
			set = "heldout"
		}
		rec := []string{r.Name, set, r.Shape.String(), strconv.Itoa(r.ISL), strconv.Itoa(r.OSL), strconv.Itoa(r.Conc), strconv.Itoa(r.Requests),
			g(r.TTFT), g(r.TPOT), g(r.E2E), g(r.OutputTPS), strconv.FormatInt(r.PeakRSSBytes, 10), g(r.TTFTSpread), g(r.TPOTSpread), g(r.CPUShare), g(r.SgemmFLOPS)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadRows reads rows written by WriteRows. Every value is checked: a
// malformed row is an error naming its line and column.
func ReadRows(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("sweep rows: %w", err)
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(header, ",") {
		return nil, fmt.Errorf("sweep rows: want the header %s", strings.Join(header, ","))
	}
	var rows []Row
	for i, rec := range recs[1:] {
		line := i + 2
		if len(rec) != len(header) {
			return nil, fmt.Errorf("sweep rows: line %d has %d fields, want %d", line, len(rec), len(header))
		}
		bad := func(col int, why string) error {
			return fmt.Errorf("sweep rows: line %d, column %s = %q: %s", line, header[col], rec[col], why)
		}
		var row Row
		row.Name = rec[0]
		switch rec[1] {
		case "fit":
		case "heldout":
			row.HeldOut = true
		default:
			return nil, bad(1, "want fit or heldout")
		}
		sh, err := ParseShape(rec[2])
		if err != nil {
			return nil, bad(2, err.Error())
		}
		row.Shape = sh
		ints := []*int{&row.ISL, &row.OSL, &row.Conc, &row.Requests}
		for j, p := range ints {
			n, err := strconv.Atoi(rec[3+j])
			if err != nil || n < 1 || n > 1<<20 {
				return nil, bad(3+j, "want an integer in [1, 1048576]")
			}
			*p = n
		}
		fl := []*float64{&row.TTFT, &row.TPOT, &row.E2E, &row.OutputTPS}
		for j, p := range fl {
			x, err := strconv.ParseFloat(rec[7+j], 64)
			if err != nil || !(x >= 0) || math.IsInf(x, 0) {
				return nil, bad(7+j, "want a finite number ≥ 0")
			}
			*p = x
		}
		rss, err := strconv.ParseInt(rec[11], 10, 64)
		if err != nil || rss < 0 {
			return nil, bad(11, "want an integer ≥ 0")
		}
		row.PeakRSSBytes = rss
		fl = []*float64{&row.TTFTSpread, &row.TPOTSpread, &row.CPUShare, &row.SgemmFLOPS}
		for j, p := range fl {
			x, err := strconv.ParseFloat(rec[12+j], 64)
			if err != nil || !(x >= 0) || math.IsInf(x, 0) {
				return nil, bad(12+j, "want a finite number ≥ 0")
			}
			*p = x
		}
		rows = append(rows, row)
	}
	return rows, nil
}

//go:embed sweep.csv
var sweepCSV string

// CommittedRows returns the rows of the last calibration (sweep.csv).
func CommittedRows() ([]Row, error) { return ReadRows(strings.NewReader(sweepCSV)) }

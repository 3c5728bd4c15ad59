package nativecal

import (
	"bufio"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/servebench"
)

// Provenance is where and when a sweep's rows were measured. It travels
// with the rows (comment lines above the CSV header, "# key: value"), so
// that a fit from rows (calibrate-native --from-rows) says whose rows they
// are without asking the machine it runs on.
type Provenance struct {
	Hostname   string        // os.Hostname of the measuring machine
	Host       hardware.Host // its identity (CPU model, CPUs, last-level cache)
	Start, End time.Time     // the sweep's first and last measurement (UTC)
	Load       string        // the load while measuring, as text
	Note       string        // anything else worth knowing (free text)
}

// Window formats the measuring window: "2026-12-01 16:36–16:50 UTC", or ""
// when not recorded.
func (p Provenance) Window() string {
	if p.Start.IsZero() {
		return ""
	}
	s, e := p.Start.UTC(), p.End.UTC()
	switch {
	case e.IsZero() || e.Equal(s):
		return s.Format("2006-01-02 15:04 UTC")
	case s.Format("2006-01-02") == e.Format("2006-01-02"):
		return s.Format("2006-01-02 15:04") + "–" + e.Format("15:04 UTC")
	}
	return s.Format("2006-01-02 15:04") + " – " + e.Format("2006-01-02 15:04 UTC")
}

// provenanceKeys are the comment keys of the rows' provenance, in the
// order WriteSweep writes them.
var provenanceKeys = []string{"hostname", "cpu", "cpus", "llc_bytes", "start", "end", "load", "note"}

func (p Provenance) fields() []string {
	t := func(x time.Time) string {
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339)
	}
	n := func(x int64) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatInt(x, 10)
	}
	return []string{p.Hostname, p.Host.CPU, n(int64(p.Host.CPUs)), n(p.Host.LLCBytes), t(p.Start), t(p.End), p.Load, p.Note}
}

func (p *Provenance) set(key, val string) error {
	num := func() (int64, error) {
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 1 || n > 1<<50 {
			return 0, fmt.Errorf("want a positive integer")
		}
		return n, nil
	}
	var err error
	switch key {
	case "hostname":
		p.Hostname = val
	case "cpu":
		p.Host.CPU = val
	case "cpus":
		var n int64
		n, err = num()
		p.Host.CPUs = int(n)
	case "llc_bytes":
		p.Host.LLCBytes, err = num()
	case "start", "end":
		var t time.Time
		if t, err = time.Parse(time.RFC3339, val); err != nil {
			err = fmt.Errorf("want an RFC 3339 time such as 2026-12-01T16:36:00Z")
		}
		if key == "start" {
			p.Start = t.UTC()
		} else {
			p.End = t.UTC()
		}
	case "load":
		p.Load = val
	case "note":
		p.Note = val
	default:
		return fmt.Errorf("unknown key (want one of %s)", strings.Join(provenanceKeys, ", "))
	}
	return err
}

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

// WriteRows writes rows as CSV with a header and no provenance.
func WriteRows(w io.Writer, rows []Row) error { return WriteSweep(w, Provenance{}, rows) }

// WriteSweep writes the provenance as comment lines ("# key: value", the
// recorded keys only), then rows as CSV with a header.
func WriteSweep(w io.Writer, p Provenance, rows []Row) error {
	for i, v := range p.fields() {
		if v == "" {
			continue
		}
		if strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("sweep rows: provenance %s holds a line break", provenanceKeys[i])
		}
		if _, err := fmt.Fprintf(w, "# %s: %s\n", provenanceKeys[i], v); err != nil {
			return err
		}
	}
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

// ReadRows reads the rows of a sweep written by WriteSweep or WriteRows,
// without its provenance.
func ReadRows(r io.Reader) ([]Row, error) {
	_, rows, err := ReadSweep(r)
	return rows, err
}

// ReadSweep reads a sweep written by WriteSweep: the provenance lines (none
// in rows written before they existed: a zero Provenance), then the rows.
// Every value is checked: a malformed line is an error naming it.
func ReadSweep(r io.Reader) (Provenance, []Row, error) {
	var p Provenance
	br := bufio.NewReader(r)
	skip := 0 // comment lines before the header
	for {
		b, err := br.Peek(1)
		if err != nil || b[0] != '#' {
			break
		}
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return p, nil, fmt.Errorf("sweep rows: %w", err)
		}
		skip++
		k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ":")
		if !ok {
			return p, nil, fmt.Errorf("sweep rows: line %d: want \"# key: value\"", skip)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if err := p.set(k, v); err != nil {
			return p, nil, fmt.Errorf("sweep rows: line %d, %s = %q: %v", skip, k, v, err)
		}
	}
	rows, err := readRows(br, skip)
	return p, rows, err
}

// readRows reads the CSV part of a sweep; skip is the number of lines
// before it (for the line numbers of errors).
func readRows(r io.Reader, skip int) ([]Row, error) {
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
		line := i + 2 + skip
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

// CommittedSweep returns the last calibration's provenance and rows (sweep.csv).
func CommittedSweep() (Provenance, []Row, error) { return ReadSweep(strings.NewReader(sweepCSV)) }

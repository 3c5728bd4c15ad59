package nativecal

import (
	"fmt"
	"io"
	"math"
	"sort"
	"unicode"
	"unicode/utf8"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// Target is the median absolute error each metric must stay within on the
// held-out rows (issue 12).
const Target = 0.10

// Scored is one row with its prediction and absolute percentage errors
// (fractions; −1 where the row has no figure, e.g. memory without RSS).
type Scored struct {
	Row
	Pred                          Prediction
	ErrTTFT, ErrTPOT, ErrTP, ErrM float64
}

// SetScore is the median and the largest absolute percentage error of a
// set of rows, per metric (−1 where no row has the metric).
type SetScore struct {
	Rows                                     int
	TTFT, TPOT, Throughput, Memory           float64 // medians
	MaxTTFT, MaxTPOT, MaxThroughput, MaxMemo float64
}

// Ranked is one child in the TPOT ranking.
type Ranked struct {
	Name               string
	Measured, Estimate float64 // TPOT, s
	// Ratios to the first child of the ranking set (uniform384).
	MeasuredRatio, EstimateRatio float64
}

// Report is Validate's result.
type Report struct {
	HeldOut, Fit SetScore
	Rows         []Scored
	// Ranking: the held-out children at isl 128, osl 64, concurrency 4,
	// by measured TPOT; RankingAgrees when the estimate orders them the
	// same; Kendall is Kendall's τ between the two orders.
	Ranking       []Ranked
	RankingAgrees bool
	Kendall       float64
	// Load during the measurement: the median and range of the CPU share
	// and of the sgemm rate over the rows.
	CPUShare, CPUShareMin, SgemmMedian, SgemmMin, SgemmMax float64
	// TTFTSpread and TPOTSpread are the medians over the rows of the
	// spread of a row's runs, (max − min)/median: the measurement's own
	// noise, a floor under the estimate's error.
	TTFTSpread, TPOTSpread float64
	// CacheBytes is the coefficients' effective cache for the weights
	// (0: no split).
	CacheBytes float64
	// Provenance is where and when the rows were measured, as they record
	// it; Here compares that host with the one the report is read on
	// (CheckHost). Every figure above is the rows' host's.
	Provenance Provenance
	Here       *HostCheck `json:",omitempty"`
}

// HostCheck says whether the rows' host is the current one.
type HostCheck struct {
	This    hardware.Host
	Applies hardware.HostMatch // "same", "different" or "unknown"
	Why     string
}

// CheckHost compares the rows' recorded host with this one (the machine
// the report is read on: hardware.ThisHost, or a stand-in in tests).
func (r *Report) CheckHost(this hardware.Host) {
	h := &HostCheck{This: this}
	if r.Provenance.Host.Zero() {
		h.Applies, h.Why = hardware.UncertainHost, "the rows do not record their host, so whether this is that host cannot be told"
	} else {
		h.Applies, h.Why = r.Provenance.Host.Compare(this)
	}
	r.Here = h
}

// whose names the rows' host for the report's lines: "vm's" or "the rows'".
func (r *Report) whose() string {
	if n := r.Provenance.Hostname; n != "" {
		return n + "'s"
	}
	return "the rows'"
}

// Validate scores co on rows.
func Validate(parent *architecture.Model, rows []Row, co estimate.NativeCoeffs) (*Report, error) {
	m, err := newModel(parent)
	if err != nil {
		return nil, err
	}
	rep := &Report{CacheBytes: co.CacheBytes}
	var held, fit []Scored
	var shares, rates, ttftSp, tpotSp []float64
	for i := range rows {
		r := rows[i]
		p, err := m.predict(&r, co)
		if err != nil {
			return nil, fmt.Errorf("nativecal: row %d (%s): %w", i+1, r.Name, err)
		}
		sc := Scored{Row: r, Pred: p, ErrTTFT: ape(p.TTFT, r.TTFT), ErrTPOT: ape(p.TPOT, r.TPOT), ErrTP: ape(p.OutputTPS, r.OutputTPS), ErrM: -1}
		if r.PeakRSSBytes > 0 {
			sc.ErrM = ape(p.PeakBytes, float64(r.PeakRSSBytes))
		}
		rep.Rows = append(rep.Rows, sc)
		if r.HeldOut {
			held = append(held, sc)
		} else {
			fit = append(fit, sc)
		}
		shares = append(shares, r.CPUShare)
		ttftSp, tpotSp = append(ttftSp, r.TTFTSpread), append(tpotSp, r.TPOTSpread)
		rates = append(rates, r.SgemmFLOPS)
	}
	rep.HeldOut, rep.Fit = score(held), score(fit)
	if len(rows) > 0 {
		rep.CPUShare, rep.SgemmMedian = median(shares), median(rates)
		rep.CPUShareMin, rep.SgemmMin, rep.SgemmMax = minOf(shares), minOf(rates), maxOf(rates)
		rep.TTFTSpread, rep.TPOTSpread = median(ttftSp), median(tpotSp)
	}
	for _, s := range held {
		if s.ISL == 128 && s.OSL == 64 && s.Conc == 4 {
			rep.Ranking = append(rep.Ranking, Ranked{Name: s.Name, Measured: s.TPOT, Estimate: s.Pred.TPOT})
		}
	}
	if len(rep.Ranking) > 0 {
		ref := rep.Ranking[0]
		for i := range rep.Ranking {
			rep.Ranking[i].MeasuredRatio = rep.Ranking[i].Measured / ref.Measured
			rep.Ranking[i].EstimateRatio = rep.Ranking[i].Estimate / ref.Estimate
		}
		sort.SliceStable(rep.Ranking, func(a, b int) bool { return rep.Ranking[a].Measured < rep.Ranking[b].Measured })
		rep.RankingAgrees = sort.SliceIsSorted(rep.Ranking, func(a, b int) bool { return rep.Ranking[a].Estimate < rep.Ranking[b].Estimate })
		rep.Kendall = kendall(rep.Ranking)
	}
	return rep, nil
}

func ape(pred, meas float64) float64 {
	if !(meas > 0) {
		return -1
	}
	return math.Abs(pred-meas) / meas
}

func score(rows []Scored) SetScore {
	s := SetScore{Rows: len(rows)}
	col := func(f func(Scored) float64) (med, mx float64) {
		var xs []float64
		for _, r := range rows {
			if x := f(r); x >= 0 {
				xs = append(xs, x)
			}
		}
		if len(xs) == 0 {
			return -1, -1
		}
		return median(xs), maxOf(xs)
	}
	s.TTFT, s.MaxTTFT = col(func(r Scored) float64 { return r.ErrTTFT })
	s.TPOT, s.MaxTPOT = col(func(r Scored) float64 { return r.ErrTPOT })
	s.Throughput, s.MaxThroughput = col(func(r Scored) float64 { return r.ErrTP })
	s.Memory, s.MaxMemo = col(func(r Scored) float64 { return r.ErrM })
	return s
}

// kendall is Kendall's τ-a between the measured order of rs (sorted by
// Measured) and the estimated one.
func kendall(rs []Ranked) float64 {
	n := len(rs)
	if n < 2 {
		return 1
	}
	c := 0
	for i := range n {
		for j := i + 1; j < n; j++ {
			dm := rs[j].Measured - rs[i].Measured
			de := rs[j].Estimate - rs[i].Estimate
			switch {
			case dm*de > 0:
				c++
			case dm*de < 0:
				c--
			}
		}
	}
	return float64(c) / float64(n*(n-1)/2)
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

// Print writes the report as text.
func (r *Report) Print(w io.Writer) {
	pc := func(x float64) string {
		if x < 0 {
			return "    –"
		}
		return fmt.Sprintf("%5.1f%%", 100*x)
	}
	ok := func(x float64) string {
		if x < 0 {
			return "no data"
		}
		if x <= Target {
			return "ok"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "Native engine on %s: estimate vs bench-serve (median absolute error; target ≤ %.0f%% held out)\n", Machine, 100*Target)
	p := r.Provenance
	where, when := "a host they do not record", p.Window()
	if !p.Host.Zero() {
		where = p.Host.String()
		if p.Hostname != "" {
			where = p.Hostname + " (" + where + ")"
		}
	}
	if when == "" {
		when = "at a time they do not record"
	}
	fmt.Fprintf(w, "Rows measured on %s, %s.\n", where, when)
	if h := r.Here; h != nil {
		fmt.Fprintf(w, "This host: %s. %s", h.This, upperFirst(h.Why))
		switch h.Applies {
		case hardware.OtherHost:
			fmt.Fprintf(w, ": these are another host's rows, and every figure below is that host's, not this one's.\n")
		case hardware.UncertainHost:
			fmt.Fprintf(w, ": the figures below hold for the rows' host; whether for this one is not known.\n")
		default:
			fmt.Fprintf(w, ".\n")
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-26s %8s %8s %8s %8s\n", "", "TTFT", "TPOT", "tok/s", "memory")
	for _, s := range []struct {
		name string
		sc   SetScore
	}{{fmt.Sprintf("held out (%d rows)", r.HeldOut.Rows), r.HeldOut}, {fmt.Sprintf("fitted (%d rows)", r.Fit.Rows), r.Fit}} {
		fmt.Fprintf(w, "%-26s %8s %8s %8s %8s\n", s.name, pc(s.sc.TTFT), pc(s.sc.TPOT), pc(s.sc.Throughput), pc(s.sc.Memory))
		fmt.Fprintf(w, "%-26s %8s %8s %8s %8s\n", "  largest", pc(s.sc.MaxTTFT), pc(s.sc.MaxTPOT), pc(s.sc.MaxThroughput), pc(s.sc.MaxMemo))
	}
	h := r.HeldOut
	fmt.Fprintf(w, "held-out targets on %s rows: TTFT %s, TPOT %s, throughput %s, memory %s", r.whose(), ok(h.TTFT), ok(h.TPOT), ok(h.Throughput), ok(h.Memory))
	if r.Here != nil {
		switch r.Here.Applies {
		case hardware.OtherHost:
			fmt.Fprintf(w, " (another host's rows: nothing about this host)")
		case hardware.UncertainHost:
			fmt.Fprintf(w, " (not known to hold on this host)")
		}
	}
	fmt.Fprintln(w)
	if r.CacheBytes > 0 {
		fmt.Fprintf(w, "effective cache for the weights: %.1f MiB (fitted): weights beyond it stream from memory at the slower rate\n", r.CacheBytes/(1<<20))
	}
	fmt.Fprintln(w)
	if len(r.Ranking) > 0 {
		agree := "the same order"
		if !r.RankingAgrees {
			agree = "a different order"
		}
		fmt.Fprintf(w, "Held-out children by TPOT at isl 128, osl 64, concurrency 4 (estimate gives %s; Kendall τ %.2f):\n", agree, r.Kendall)
		fmt.Fprintf(w, "  %-14s %10s %10s %12s %12s\n", "child", "measured", "estimate", "measured ×", "estimate ×")
		for _, k := range r.Ranking {
			fmt.Fprintf(w, "  %-14s %8.3fms %8.3fms %11.2f× %11.2f×\n", k.Name, 1e3*k.Measured, 1e3*k.Estimate, k.MeasuredRatio, k.EstimateRatio)
		}
		fmt.Fprintln(w, "  (× = TPOT relative to uniform384)")
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-13s %-4s %12s %17s %17s %17s %17s\n", "shape", "set", "isl/osl/c", "TTFT ms meas/est", "TPOT ms meas/est", "tok/s meas/est", "MiB meas/est")
	for _, s := range r.Rows {
		set := "fit"
		if s.HeldOut {
			set = "held"
		}
		mem := "      –"
		if s.PeakRSSBytes > 0 {
			mem = fmt.Sprintf("%7.1f", float64(s.PeakRSSBytes)/(1<<20))
		}
		fmt.Fprintf(w, "%-13s %-4s %12s %8.2f/%-8.2f %8.3f/%-8.3f %8.0f/%-8.0f %s/%-7.1f\n", s.Name, set, fmt.Sprintf("%d/%d/%d", s.ISL, s.OSL, s.Conc),
			1e3*s.TTFT, 1e3*s.Pred.TTFT, 1e3*s.TPOT, 1e3*s.Pred.TPOT, s.OutputTPS, s.Pred.OutputTPS, mem, s.Pred.PeakBytes/(1<<20))
	}
	fmt.Fprintf(w, "\nLoad while measuring: CPU share median %.0f%% (lowest %.0f%%); sgemm %.1f GFLOP/s median (%.1f–%.1f)\n",
		100*r.CPUShare, 100*r.CPUShareMin, r.SgemmMedian/1e9, r.SgemmMin/1e9, r.SgemmMax/1e9)
	fmt.Fprintf(w, "Noise: a row's runs spread (max−min)/median by %.0f%% in TTFT and %.0f%% in TPOT (medians over the rows)\n",
		100*r.TTFTSpread, 100*r.TPOTSpread)
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

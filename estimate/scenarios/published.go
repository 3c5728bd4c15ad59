package scenarios

import (
	"bytes"
	"context"
	"encoding/csv"
	"math"
	"slices"
	"strconv"

	"github.com/autocompress/autocompress/estimate/groundtruth"
	"github.com/autocompress/autocompress/hardware"
)

// Published prices the offline (max-load) rows of the published serving
// tables (groundtruth.IndependentTables) through a scenario file, as a user
// would, and scores the output throughput against the published one: once
// with the settings columns empty (the engines' defaults), once with the
// kv_dtype and mem_fraction the sources state. It checks that the columns
// carry what the flags do on data no fit has seen.
func Published(ctx context.Context, rows []groundtruth.IndependentRow) (defaults, stated groundtruth.IndependentCell, err error) {
	var keep []*groundtruth.IndependentRow
	for i := range rows {
		if r := &rows[i]; r.Mode == groundtruth.ModeOffline && r.OutputTokS > 0 {
			keep = append(keep, r)
		}
	}
	run := func(withStated bool) (groundtruth.IndependentCell, error) {
		var in bytes.Buffer
		cw := csv.NewWriter(&in)
		_ = cw.Write(In)
		for i, r := range keep {
			kv, frac := "", ""
			if withStated {
				kv = r.KVDType
				if r.MemFraction > 0 {
					frac = strconv.FormatFloat(r.MemFraction, 'g', -1, 64)
				}
			}
			_ = cw.Write([]string{strconv.Itoa(i), r.Model, r.GPU, string(r.Engine), r.Precision, strconv.Itoa(r.TP),
				strconv.Itoa(r.ISL), strconv.Itoa(r.OSL), "", "inf", strconv.Itoa(r.NumRequests), kv, frac, "", "", "", ""})
		}
		cw.Flush()
		var out bytes.Buffer
		if _, _, err := Run(ctx, &in, &out, hardware.Default(), nil, true); err != nil {
			return groundtruth.IndependentCell{}, err
		}
		recs, err := csv.NewReader(&out).ReadAll()
		if err != nil {
			return groundtruth.IndependentCell{}, err
		}
		var apes, ratios []float64
		outCol := slices.Index(Out, "output_tok_s")
		for _, rec := range recs[1:] {
			i, _ := strconv.Atoi(rec[0])
			pred, err := strconv.ParseFloat(rec[outCol], 64)
			if rec[1] != "true" || err != nil || i < 0 || i >= len(keep) {
				continue
			}
			pub := keep[i].OutputTokS
			apes = append(apes, math.Abs(pred-pub)/pub)
			ratios = append(ratios, pred/pub-1)
		}
		c := groundtruth.SummariseAPE(apes, ratios)
		c.Engine, c.Source, c.Metric = "all", "max-load", groundtruth.Throughput
		return c, nil
	}
	if defaults, err = run(false); err != nil {
		return defaults, stated, err
	}
	stated, err = run(true)
	return defaults, stated, err
}

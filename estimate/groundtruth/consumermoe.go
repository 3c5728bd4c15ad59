package groundtruth

// Published llama-bench measurements of MoE models on GeForce cards
// (testdata/llamacpp_moe.csv, provenance in llamacpp_moe.md): gpt-oss-20b
// in its native MXFP4_MOE GGUF and Qwen3-30B-A3B in Q4_0, decode (tg) and
// prompt processing at a stated number of tokens per step (-ub). No fit
// reads them, so pricing them with the shipped coefficients is a held-out
// check of three things the dense llama-bench table cannot test: MXFP4
// expert weights on llama.cpp, the MoE decode step (the experts one token
// routes to), and the experts a step of several tokens touches.

import (
	_ "embed"
	"math"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/estimate"
)

//go:embed testdata/llamacpp_moe.csv
var llamaCPPMoECSV []byte

// LlamaCPPMoETables returns the embedded rows (testdata/llamacpp_moe.csv).
func LlamaCPPMoETables() ([]LlamaBenchRow, error) {
	return ReadLlamaBench(strings.NewReader(string(llamaCPPMoECSV)), "llamacpp_moe.csv")
}

// MoEStepTokens is the largest step (tokens per ubatch) reported as a
// "pp-step" row: up to it a step's cost is the weights of the experts its
// tokens touch, which is what the check measures. Larger steps of a long
// prompt are "pp-long" (attention over the prompt dominates; see
// LongPrompt).
const MoEStepTokens = 64

// MoETest names the group a row is reported in: "tg", "pp-step" (a prompt
// processed MoEStepTokens tokens per step or fewer), "pp" (other prompts
// up to LongPrompt tokens) or "pp-long".
func MoETest(r *LlamaBenchRow) string {
	switch {
	case r.Test == BenchTG:
		return "tg"
	case r.Ubatch > 0 && r.Ubatch <= MoEStepTokens:
		return "pp-step"
	case r.Tokens > LongPrompt:
		return "pp-long"
	}
	return "pp"
}

// MoEResult is one row priced with the shipped coefficients.
type MoEResult struct {
	Row       *LlamaBenchRow
	Predicted float64 // tokens per second
	APE       float64
	// StreamedGB is the bytes a one-token decode step streams (weights of
	// the dense part and of the experts one token touches), in GB: what
	// shows the MXFP4 experts priced at 4.25 bits.
	StreamedGB float64
	// WeightGiB is the weights the row's GGUF holds as priced, in GiB
	// (llama-bench prints the file's size beside every row).
	WeightGiB float64
}

// MoECell summarises one source's (or "all" sources') rows of one test group.
type MoECell struct {
	Source string  `json:"source"`
	Test   string  `json:"test"`
	N      int     `json:"n"`
	Median float64 `json:"median_ape"`
	P90    float64 `json:"p90_ape"`
	Bias   float64 `json:"median_signed"`
}

// ScoreLlamaCPPMoE prices rows with cf's llama.cpp family of each row's GPU
// and summarises the errors per source and test group, then every source
// together ("all"), in that order.
func ScoreLlamaCPPMoE(rows []LlamaBenchRow, cf *estimate.CoeffFile) ([]MoEResult, []MoECell, error) {
	cases, err := prepareBenchFile(rows, "llamacpp_moe.csv")
	if err != nil {
		return nil, nil, err
	}
	res := make([]MoEResult, len(cases))
	type key struct{ src, test string }
	apes, signed := map[key][]float64{}, map[key][]float64{}
	for i, b := range cases {
		co, _ := cf.Family(b.fam)
		p := b.predict(co)
		res[i] = MoEResult{Row: b.row, Predicted: p, APE: math.Abs(p-b.row.TokS) / b.row.TokS, StreamedGB: b.s.StreamedBytes(1) / 1e9, WeightGiB: b.s.WeightBytes / (1 << 30)}
		t := MoETest(b.row)
		for _, src := range []string{b.row.Source, "all"} {
			k := key{src, t}
			apes[k] = append(apes[k], res[i].APE)
			signed[k] = append(signed[k], p/b.row.TokS-1)
		}
	}
	cells := make([]MoECell, 0, len(apes))
	for k, v := range apes {
		med, p90 := quantiles(v)
		bias, _ := quantiles(signed[k])
		cells = append(cells, MoECell{Source: k.src, Test: k.test, N: len(v), Median: med, P90: p90, Bias: bias})
	}
	sort.Slice(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if (a.Source == "all") != (b.Source == "all") {
			return b.Source == "all"
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Test < b.Test
	})
	return res, cells, nil
}

// MoECellFor returns the cell of source and test.
func MoECellFor(cells []MoECell, source, test string) (MoECell, bool) {
	for _, c := range cells {
		if c.Source == source && c.Test == test {
			return c, true
		}
	}
	return MoECell{}, false
}

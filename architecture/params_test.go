package architecture

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// publishedCount is what a model's publisher states. Exact counts come from
// the safetensors metadata on the model's HF page (the sum of all tensor
// elements); rounded ones, in billions as strings, from the model card and
// are asserted at the precision the card uses (rounded or, as some cards do,
// truncated). activeSansInput is "active" as gpt-oss and Nemotron-3 state it:
// without the input embedding (the LM head is counted).
type publishedCount struct {
	total                    int64  // exact when non-zero
	totalB, activeB, nonEmbB string // rounded figures in billions
	activeSansInputB         string
}

var published = map[string]publishedCount{
	// HF safetensors metadata of meta-llama/Llama-3.1-8B, -70B, -405B.
	"meta-llama--Meta-Llama-3.1-8B.json":      {total: 8_030_261_248},
	"meta-llama--Meta-Llama-3.1-70B.json":     {total: 70_553_706_496},
	"meta-llama--Meta-Llama-3.1-405B.json":    {total: 405_853_388_800},
	"nvidia--Llama-3.1-70B-Instruct-FP8.json": {total: 70_553_706_496},
	// Mixtral: HF metadata 46,702,792,704; card: 12.9B active.
	"mistralai--Mixtral-8x7B-v0.1.json": {total: 46_702_792_704, activeB: "12.9"},
	// Qwen3 model cards: "Number of Parameters: 0.6B, Non-Embedding: 0.44B" etc.
	"Qwen--Qwen3-0.6B.json": {totalB: "0.6", nonEmbB: "0.44"},
	"Qwen--Qwen3-1.7B.json": {totalB: "1.7", nonEmbB: "1.4"},
	"Qwen--Qwen3-8B.json":   {totalB: "8.2", nonEmbB: "6.95"},
	"Qwen--Qwen3-32B.json":  {totalB: "32.8", nonEmbB: "31.2"},
	// Qwen3 MoE cards: "30.5B in total and 3.3B activated", non-embedding 29.9B;
	// "235B in total and 22B activated", non-embedding 234B.
	"Qwen--Qwen3-30B-A3B.json":   {totalB: "30.5", activeB: "3.3", nonEmbB: "29.9"},
	"Qwen--Qwen3-235B-A22B.json": {totalB: "235", activeB: "22", nonEmbB: "234"},
	// HF page of nvidia/Llama-3_3-Nemotron-Super-49B-v1: 49.9B params.
	"nvidia--Llama-3_3-Nemotron-Super-49B-v1.json": {totalB: "49.9"},
	// nvidia/Nemotron-H-56B-Base-8K: "56B" in name and card.
	"nvidia--Nemotron-H-56B-Base-8K.json": {totalB: "56"},
	// Nemotron-3 Nano card: 31.6B total, ~3.2B active (3.6B with embeddings).
	"nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json": {totalB: "31.6", activeB: "3.6", activeSansInputB: "3.2"},
	// Nemotron-3 Super: "120B total, 12B active" (120.67B and 12.23B without
	// the input embedding here). MTP layers are not part of the decoder and
	// not counted.
	"nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json": {totalB: "120", activeSansInputB: "12"},
	// gpt-oss model card: 116.83B total / 5.13B active; 20.91B / 3.61B. Active
	// excludes the input embedding there.
	"openai--gpt-oss-120b.json": {totalB: "116.83", activeSansInputB: "5.13"},
	"openai--gpt-oss-20b.json":  {totalB: "20.91", activeSansInputB: "3.61"},
}

// matchesB reports whether n, in billions, rounds or truncates to the
// figure at the figure's precision.
func matchesB(n int64, figure string) bool {
	digits := 0
	if i := strings.IndexByte(figure, '.'); i >= 0 {
		digits = len(figure) - i - 1
	}
	want, err := strconv.ParseFloat(figure, 64)
	if err != nil {
		panic(err)
	}
	p := math.Pow(10, float64(digits))
	x := float64(n) / 1e9 * p
	return math.Round(x)/p == want || math.Floor(x)/p == want
}

func TestParamsPublished(t *testing.T) {
	seen := 0
	for _, file := range realConfigs(t) {
		base := fileBase(file)
		want, ok := published[base]
		if !ok {
			t.Errorf("%s: no published count recorded; add one", base)
			continue
		}
		seen++
		m, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		checkPublished(t, base, m, want)
	}
	if seen < len(published) {
		t.Errorf("checked %d of %d published counts", seen, len(published))
	}
}

func checkPublished(t *testing.T, base string, m *Model, want publishedCount) {
	t.Helper()
	p := m.Params()
	check := func(what string, got int64, figure string) {
		if figure != "" && !matchesB(got, figure) {
			t.Errorf("%s %s = %d, publisher states %sB", base, what, got, figure)
		}
	}
	if want.total != 0 && p.Total != want.total {
		t.Errorf("%s total = %d, publisher states %d", base, p.Total, want.total)
	}
	check("total", p.Total, want.totalB)
	check("active", p.Active, want.activeB)
	check("non-embedding", p.NonEmbedding(), want.nonEmbB)
	check("active without input embedding", p.Active-p.Embedding, want.activeSansInputB)
	if hasMoE(m) && p.Active >= p.Total {
		t.Errorf("%s: MoE model with active = total", base)
	}
}

func fileBase(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' || p[i] == '\\' {
			return p[i+1:]
		}
	}
	return p
}

func hasMoE(m *Model) bool {
	for _, l := range m.Layers {
		if l.MoE != nil {
			return true
		}
	}
	return false
}

func TestParamsPerLayerSums(t *testing.T) {
	for file, m := range allModels(t) {
		p := m.Params()
		sum, act := p.Embedding+p.LMHead+p.FinalNorm, p.Embedding+p.LMHead+p.FinalNorm
		for i := range p.PerLayer {
			sum += p.PerLayer[i]
			act += p.ActivePerLayer[i]
			if p.ActivePerLayer[i] > p.PerLayer[i] || p.ActivePerLayer[i] <= 0 {
				t.Errorf("%s layer %d: active %d of %d", file, i, p.ActivePerLayer[i], p.PerLayer[i])
			}
		}
		if sum != p.Total || act != p.Active {
			t.Errorf("%s: per-layer sums %d / %d, totals %d / %d", file, sum, act, p.Total, p.Active)
		}
	}
}

func TestKVElemsPerToken(t *testing.T) {
	m, err := Preset("meta-llama/Llama-2-7b-hf")
	if err != nil {
		t.Fatal(err)
	}
	// 32 layers × 2 × 32 KV heads × 128 = 262,144 elements: 512 KiB at bf16.
	if got := m.KVElemsPerToken(); got != 262144 {
		t.Errorf("KVElemsPerToken = %d, want 262144", got)
	}
}

func ExampleModel_Params() {
	m, err := Load("meta-llama/Llama-2-7b-hf")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := m.Params()
	fmt.Println(m.Arch, len(m.Layers), "layers")
	fmt.Println("total", p.Total)
	fmt.Println("embedding", p.Embedding, "lm head", p.LMHead)
	fmt.Println("layer 0", p.PerLayer[0])
	// Output:
	// LlamaForCausalLM 32 layers
	// total 6738415616
	// embedding 131072000 lm head 131072000
	// layer 0 202383360
}

func TestSSMStateElems(t *testing.T) {
	m, err := Preset("nvidia/Nemotron-H-56B-Base-8K")
	if err != nil {
		t.Fatal(err)
	}
	// 54 Mamba layers, 256 heads × 64 = 16384 d_inner, 8 groups × 256 state:
	// conv 3·(16384 + 4096) = 61,440 and ssm 16384·256 = 4,194,304 per layer.
	conv, ssm := m.SSMStateElems()
	if conv != 54*61440 || ssm != 54*4194304 {
		t.Errorf("SSMStateElems = %d, %d; want %d, %d", conv, ssm, 54*61440, 54*4194304)
	}
	if k := m.Layers[0].Kind(); k != "mamba" {
		t.Errorf("layer 0 kind %q", k)
	}
	if k := (Layer{}).Kind(); k != "empty" {
		t.Errorf("empty layer kind %q", k)
	}
}

package search

import (
	"errors"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
	"github.com/autocompress/autocompress/workload"
)

// realScenario is one deployment of the README's published-config table.
// The table itself is the CLI's (scripts/readmetables runs its commands,
// with the CLI's default --margin auto); this test searches the same
// deployments with no margin, to check the children it chooses.
type realScenario struct {
	name, config, gpu string
	engine            estimate.Engine
	workload          string
	precisions        []string
	b                 Budgets
	// refused is set where the context rule refuses the deployment (the
	// workload's context is past the config's max_position_embeddings):
	// Execute says so before any search.
	refused bool
}

var realScenarios = []realScenario{
	{"Qwen3-8B, RTX 5070 game character, llama.cpp", "Qwen--Qwen3-8B.json", "rtx-5070", estimate.LlamaCPP, "game-character", []string{"q4_k_m", "q8_0"}, Budgets{MaxMemory: 11 << 30, MaxE2E: 3}, false},
	{"Llama-3.1-8B, RTX 5070 game character, llama.cpp", "meta-llama--Meta-Llama-3.1-8B.json", "rtx-5070", estimate.LlamaCPP, "game-character", []string{"q4_k_m", "q8_0"}, Budgets{MaxMemory: 11 << 30, MaxE2E: 3}, false},
	{"Qwen3-8B, RTX 5070 game character, vLLM", "Qwen--Qwen3-8B.json", "rtx-5070", estimate.VLLM, "game-character", []string{"fp8", "nvfp4"}, Budgets{MaxMemory: 11 << 30, MaxE2E: 3}, false},
	{"Llama-3.1-8B, RTX 5070 game character, vLLM", "meta-llama--Meta-Llama-3.1-8B.json", "rtx-5070", estimate.VLLM, "game-character", []string{"fp8", "nvfp4"}, Budgets{MaxMemory: 11 << 30, MaxE2E: 3}, false},
	{"Llama-3.1-8B, RTX 5070 game character, SGLang", "meta-llama--Meta-Llama-3.1-8B.json", "rtx-5070", estimate.SGLang, "game-character", []string{"fp8", "nvfp4"}, Budgets{MaxMemory: 11 << 30, MaxE2E: 3}, false},
	{"Qwen3-8B, RTX 5080 long-context coding, vLLM", "Qwen--Qwen3-8B.json", "rtx-5080", estimate.VLLM, "long-context-coding", []string{"fp8", "nvfp4"}, Budgets{MaxMemory: 13.96 * (1 << 30), MaxE2E: 11.5}, true},
	{"Llama-3.1-8B, RTX 5080 long-context coding, vLLM", "meta-llama--Meta-Llama-3.1-8B.json", "rtx-5080", estimate.VLLM, "long-context-coding", []string{"fp8", "nvfp4"}, Budgets{MaxMemory: 13.96 * (1 << 30), MaxE2E: 11.5}, false},
	{"Nemotron-H-56B, one B200 at 128K, vLLM", "nvidia--Nemotron-H-56B-Base-8K.json", "b200", estimate.VLLM, "long-context-coding", []string{"bf16"}, Budgets{MaxMemory: 178e9}, true},
	{"Nemotron-3-Super-120B-A12B, one B200 at 128K, vLLM", "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json", "b200", estimate.VLLM, "long-context-coding", []string{"bf16"}, Budgets{MaxMemory: 178e9}, false},
}

// TestRealConfigs runs both strategies on the published configs of the
// README table; every chosen child meets the budgets when re-priced from
// scratch, loads in the engine, and its plan passes prune's validator. A
// deployment the context rule refuses (Qwen3-8B's 40,960 positions under
// long-context coding, Nemotron-H-56B-8K's 8,192 at 128K) is refused by
// Execute, as the search command refuses it.
func TestRealConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("sixteen searches on real configs; run without -short")
	}
	for _, sc := range realScenarios {
		t.Run(sc.name, func(t *testing.T) {
			m, err := architecture.Load(sdtest.Require(t, "configs/"+sc.config))
			if err != nil {
				t.Fatal(err)
			}
			w := wl(t, sc.workload)
			maxLen := 0
			if strings.HasPrefix(sc.name, "Nemotron") {
				maxLen = 131072
			}
			// Execute's check, before its search.
			w, err = (&Request{Parent: m, Workload: w, MaxModelLen: maxLen}).fitContext()
			if ce := (*workload.ContextError)(nil); errors.As(err, &ce) != sc.refused {
				t.Fatalf("context rule: %v; want refused: %v", err, sc.refused)
			}
			if sc.refused {
				t.Logf("refused: %v", err)
				return
			}
			s := setup{parent: m, gpu: sc.gpu, engine: sc.engine, work: w, b: sc.b, space: SpaceOptions{Precisions: sc.precisions}}
			for _, st := range Strategies() {
				sp, res, err := s.run(t, st)
				if err != nil {
					t.Logf("%s: %v", st, err)
					continue
				}
				reprice(t, s, sp, &res.Best)
				t.Logf("%-12s %s; proxy %.3f; %s %s; memory %s, E2E %s; binding %s", st, sp.Describe(&res.Best), res.Best.Quality,
					orStr(res.Best.Settings.Precision, "default"), FormatCount(res.Best.Costs.Params), FormatBytes(res.Best.Costs.MemoryBytes), FormatSeconds(res.Best.Costs.E2E), res.Binding)
			}
		})
	}
}

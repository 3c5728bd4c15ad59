package export

import "github.com/autocompress/autocompress/architecture"

// MoE rules. Every serving engine we read builds one fused expert block
// per MoE layer from one model-wide expert count and top-k of config.json:
//
//   - vLLM qwen3_moe.py, Qwen3MoeSparseMoeBlock.__init__ (002456df):
//     FusedMoE(num_experts=config.num_experts, top_k=config.num_experts_per_tok)
//     and a router ReplicatedLinear(hidden, config.num_experts); it raises
//     when the TP size exceeds num_experts.
//   - vLLM nemotron_h.py, NemotronHMoE.__init__ (00b08dc4): the gate
//     GateLinear(hidden, config.n_routed_experts), e_score_correction_bias
//     of n_routed_experts, FusedMoE(num_experts=config.n_routed_experts,
//     top_k=config.num_experts_per_tok, use_grouped_topk=True,
//     num_expert_group=config.n_group, topk_group=config.topk_group). Its
//     decoder layers look for a get_nemotron_h_config_for_layer hook on
//     the config class (heterogeneous Nemotron-H); NemotronHConfig as
//     published has none, and we write none.
//
//   - SGLang mixtral.py, MixtralMoE.__init__ (python/sglang/srt/models/
//     mixtral.py, 02356cee): num_local_experts and num_experts_per_tok of
//     the config, one router ReplicatedLinear(hidden, num_local_experts);
//     it raises when the TP size exceeds the expert count.
//   - llama.cpp src/llama-model.cpp, llm_load_hparams (the stored
//     version; its commit was not shown): one scalar n_expert and
//     n_expert_used from the GGUF keys expert_count and expert_used_count,
//     with GGML_ASSERT(n_expert_used <= n_expert); the converter writes
//     them from config.json's one count.
//
// vLLM's mixtral.py and gpt_oss.py, and TensorRT-LLM, were not read this
// session; they build their fused MoE the same way as far as we know
// (verify). So no engine loads per-layer expert counts: every MoE layer
// of a child keeps the same number (PerLayerExperts is false for every
// engine), and the top-k must not exceed it.

// The MoE loader rules, as LoaderRules (what the loader does, where it
// was read, how to fix the child).
var (
	moeOneExpertCount = &LoaderRule{ID: "moe-per-layer-experts",
		Does: "vLLM builds every MoE layer from one model-wide expert count: Qwen3MoeSparseMoeBlock.__init__ (vllm/model_executor/models/qwen3_moe.py, 002456df) reads config.num_experts, NemotronHMoE.__init__ (vllm/model_executor/models/nemotron_h.py, 00b08dc4) config.n_routed_experts, for the router's rows and FusedMoE(num_experts=...)",
		Fix:  "keep the same number of routed experts in every MoE layer"}
	moeTopK = &LoaderRule{ID: "moe-top-k",
		Does: "FusedMoE routes each token to top_k=config.num_experts_per_tok of the layer's experts (Qwen3MoeSparseMoeBlock.__init__, vllm/model_executor/models/qwen3_moe.py, 002456df), and llama.cpp's llm_load_hparams (src/llama-model.cpp) asserts n_expert_used <= n_expert",
		Fix:  "keep at least num_experts_per_tok experts, or lower the top-k to the experts kept (a plan's lower_top_k)"}
	moeGroups = &LoaderRule{ID: "moe-n-group",
		Does: "NemotronHMoE.__init__ (vllm/model_executor/models/nemotron_h.py, 00b08dc4) routes with use_grouped_topk, num_expert_group=config.n_group: the experts split into n_group equal groups",
		Fix:  "keep a multiple of n_group experts, the same number in every group"}
)

// PerLayerExperts reports whether the engine loads MoE layers with
// different routed-expert counts: none does (see the MoE rules above).
func (c Capabilities) PerLayerExperts() bool { return false }

// checkMoE applies the MoE rules: one routed-expert count in every MoE
// layer, a top-k between 1 and that count, and for a grouped router
// (n_group in the config) a count n_group divides.
func checkMoE(r *Report, m *architecture.Model, caps Capabilities, raw map[string]any) {
	first := -1
	for i, l := range m.Layers {
		x := l.MoE
		if x == nil {
			continue
		}
		if x.TopK < 1 || x.TopK > x.Experts {
			r.violateRule(i, moeTopK, "num_experts_per_tok %d with %d routed experts", x.TopK, x.Experts)
		}
		if first < 0 {
			first = i
		} else if f := m.Layers[first].MoE; f.Experts != x.Experts && !caps.PerLayerExperts() {
			r.violateRule(i, moeOneExpertCount, "%d routed experts but layer %d has %d, and %s loads no per-layer expert counts", x.Experts, first, f.Experts, engineName(caps))
		}
		if g := intField(raw, "n_group"); g > 1 && x.Experts%g != 0 {
			r.violateRule(i, moeGroups, "%d routed experts do not split into n_group %d groups", x.Experts, g)
		}
	}
}

func engineName(c Capabilities) string {
	if c.Name == "" {
		return "every engine"
	}
	return c.Name
}

// intField reads an integer config key from raw (0 when absent).
func intField(raw map[string]any, key string) int {
	switch v := raw[key].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case interface{ Int64() (int64, error) }:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

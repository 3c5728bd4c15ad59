package job

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// EngineInfo is what autocompress knows of one PyTorch engine: what the
// job directory holds for it, what it needs installed, which jobs and
// which children it takes. The table (Engines) is the one place these
// facts live.
type EngineInfo struct {
	Name string
	// Kinds are the job kinds the engine runs.
	Kinds []Kind
	// Shards is the data format its reader takes.
	Shards string
	// Config is the engine's own recipe file in the job directory ("" for
	// torch, whose recipe is the contract).
	Config string
	// Modules are the Python modules a local launch imports (checked
	// before any work).
	Modules []string
	// Requirements are requirements.txt's lines.
	Requirements []string
	// Classes are the config.json classes of uniform models it reads.
	Classes []string
	// PerLayer is true when it reads per-layer (DeciLM block_configs)
	// children; PerLayerNote says why not, otherwise.
	PerLayer     bool
	PerLayerNote string
	// Run is true when the engine has been run in this repository's tests
	// (false: only emitted; README says so).
	Run bool
	// Local is true when the engine runs on any machine this binary runs
	// on (CPU included), so that a pipeline stage can launch its job here
	// and go on; the others need GPUs and installs of their own, and their
	// jobs are emitted for the user to launch.
	Local bool
	// Unscored are classes among Classes that it runs but does not score
	// (kind importance): their importance runs in the native engine.
	Unscored []string
	// Routers are the router rules (MoEShape.Router) of the
	// mixture-of-experts blocks it runs, none for an engine without MoE
	// layers here; SharedExperts is true when it runs shared experts too.
	// MoENote says what it lacks, for the refusal.
	Routers       []string
	SharedExperts bool
	MoENote       string
}

// llamaClasses are the Llama-family classes package engine and the torch
// reference trainer run.
var llamaClasses = []string{"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}

// Engines is the table of job engines.
var Engines = []EngineInfo{
	{
		Name: "torch", Kinds: Kinds, Shards: ShardNanoGPT,
		Modules: []string{"torch"}, Local: true,
		Requirements: []string{"# the autocompress reference trainer (trainer/): torch only", "# Debian bookworm's python3-torch 1.13 (CPU, gloo) or torch 2.x (CUDA, NCCL, FSDP2)", "torch>=1.13.1,<3"},
		// acmamba.py runs the hybrid's Mamba2, attention, MLP and MoE
		// layers; acmoe.py the MoE blocks: Qwen3-MoE's and Mixtral's
		// (softmax, then top-k), Nemotron-H's (sigmoid with
		// e_score_correction_bias and group-limited top-k, relu² experts,
		// LatentMoE projections, a shared expert) and gpt-oss's (top-k of
		// the biased router's logits, then softmax; stacked experts with
		// biases and the clamped SwiGLU), with acmodel.py's attention
		// sinks, alternating sliding windows and YaRN RoPE. Its importance
		// hooks are the Llama family's.
		Classes:       append(append([]string(nil), llamaClasses...), "NemotronHForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "GptOssForCausalLM"),
		Unscored:      []string{"NemotronHForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "GptOssForCausalLM"},
		Routers:       []string{RouterSoftmaxTopK, RouterTopKSoftmax, RouterSigmoid},
		SharedExperts: true,
		MoENote:       "the reference trainer's acmoe.py runs softmax-then-top-k routers (Qwen3-MoE, Mixtral), top-k-then-softmax (gpt-oss) and sigmoid routers with shared experts (Nemotron-H)",
		PerLayer:      true, Run: true,
	},
	{
		// nemo_automodel/recipes/llm/kd.py; docs/guides/llm/knowledge-distillation.mdx.
		Name: "automodel", Kinds: []Kind{Distill}, Shards: ShardNanoGPT, Config: "recipe.yaml",
		Modules: []string{"torch", "nemo_automodel"},
		// pyproject.toml of NVIDIA-NeMo/Automodel: torch>=2.6.0, transformers==5.12.1.
		Requirements: []string{"nemo-automodel==0.7.0", "transformers==5.12.1", "torch>=2.6.0"},
		Classes:      llamaClasses,
		// _transformers/auto_model.py's trust_remote_code shim for DeciLM.
		PerLayer: true,
		MoENote:  "its recipe is emitted here for Llama-family children only (no MoE layers)",
	},
	{
		// Model-Optimizer examples/megatron_bridge/distill.py.
		Name: "megatron-bridge", Kinds: []Kind{Distill}, Shards: ShardMegatron, Config: "distill.sh",
		Modules:      []string{"torch", "megatron.bridge", "modelopt"},
		Requirements: []string{"megatron-bridge==0.6.2", "nvidia-modelopt==0.47.0", "# distill.py is Model-Optimizer's examples/megatron_bridge/distill.py (in the NeMo container); set DISTILL_PY to it"},
		Classes:      llamaClasses,
		MoENote:      "its recipe is emitted here for Llama-family children only (no MoE layers)",
		PerLayerNote: "Megatron-Bridge reads per-layer students only as ModelOpt Puzzletron AnyModel checkpoints (plugins for Llama and Qwen3 only, modelopt/torch/puzzletron/plugins/mbridge), not DeciLM block_configs, and its DeciLM bridge is to be removed in 0.7.0",
	},
}

// Native names the engine in this binary (package engine) where a command
// or stage takes a job engine's name; "" means it too.
const Native = "native"

// IsNative reports whether name means this binary rather than a job engine.
func IsNative(name string) bool { return name == "" || name == Native }

// LookupEngine returns the named job engine.
func LookupEngine(name string) (EngineInfo, bool) {
	for _, e := range Engines {
		if e.Name == name {
			return e, true
		}
	}
	return EngineInfo{}, false
}

// EngineNames lists the job engines' names, sorted.
func EngineNames() []string {
	var n []string
	for _, e := range Engines {
		n = append(n, e.Name)
	}
	sort.Strings(n)
	return n
}

// Runs reports whether the engine runs kind k.
func (e EngineInfo) Runs(k Kind) bool {
	for _, x := range e.Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// RepresentError is a model the chosen engine cannot read.
type RepresentError struct {
	Engine string
	Role   string
	Msg    string
}

func (e *RepresentError) Error() string {
	return fmt.Sprintf("job: engine %s cannot take the %s: %s", e.Engine, e.Role, e.Msg)
}

// RepresentFor is Represent for a job of kind k: an importance job also
// needs a class the engine scores.
func (e EngineInfo) RepresentFor(k Kind, role string, s Shape) error {
	if err := e.Represent(role, s); err != nil {
		return err
	}
	if k == Importance && slices.Contains(e.Unscored, s.Arch) {
		if f, ok := architecture.Lookup(s.Arch); ok && !f.Engine.Runs {
			// A family the native engine does not run: no engine here
			// scores it (none today: gpt-oss runs forward natively).
			return &RepresentError{e.Name, role, fmt.Sprintf("it runs %s but does not score it, and the native engine does not run it (%s): no engine here computes its importance", s.Arch, f.Engine.Reason)}
		}
		return &RepresentError{e.Name, role, fmt.Sprintf("it runs %s but does not score it; run importance in the native engine", s.Arch)}
	}
	return nil
}

// Represent checks that the engine reads a model of shape s in role (teacher,
// student, model), and says what to do instead when it does not.
func (e EngineInfo) Represent(role string, s Shape) error {
	for i, l := range s.Layers {
		x := l.MoE
		switch {
		case x == nil:
		case !slices.Contains(e.Routers, x.Router):
			return &RepresentError{e.Name, role, fmt.Sprintf("layer %d is a mixture of experts routed %s, and %s; choose engine torch for Qwen3-MoE, Mixtral, Nemotron-H or gpt-oss children, or the native engine, which trains Qwen3-MoE and Mixtral children too", i, x.Router, e.MoENote)}
		case x.SharedWidth > 0 && !e.SharedExperts:
			return &RepresentError{e.Name, role, fmt.Sprintf("layer %d has shared experts (width %d), and %s", i, x.SharedWidth, e.MoENote)}
		}
	}
	if s.Format == FormatDeciLM {
		if !e.PerLayer {
			return &RepresentError{e.Name, role, e.PerLayerNote + "; choose engine torch or automodel, or a uniform child"}
		}
		return nil
	}
	for _, c := range e.Classes {
		if c == s.Arch {
			return nil
		}
	}
	return &RepresentError{e.Name, role, fmt.Sprintf("%s is not among the classes it reads here (%s)", s.Arch, strings.Join(e.Classes, ", "))}
}

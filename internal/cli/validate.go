package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/export"
)

func init() {
	Register(&Command{
		Name:  "validate",
		Usage: "--model DIR --engine vllm|sglang|trtllm|llamacpp|hf|all [--tp N] [--json]",
		Short: "check that a checkpoint follows a serving engine's shape rules",
		Long: `validate checks a HuggingFace checkpoint directory against the rules the
serving engine enforces when it loads it: the architecture is one the engine
serves; every tensor is present and shaped like config.json implies; grouped
query heads divide evenly; and for DeciLM block_configs the per-engine rules
(ffn_mult only for SGLang, TensorRT-LLM and llama.cpp, FFN widths multiples of
256 and the ffn_mult round trip, head_dim = hidden/heads for llama.cpp, no
qk-norm, no attention bias on TensorRT-LLM, replace_with_linear only where
loaded, remote-code files for transformers, KV page ratios for vLLM).

Every violation is listed with its layer and rule; warnings are printed but do
not fail. --engine accepts a comma-separated list or "all". The exit status is
1 when any engine's rules are broken.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "checkpoint `directory` (config.json + safetensors), or \"parent\" for the embedded parent")
			engine := fs.String("engine", "", "engine(s): "+strings.Join(export.Engines(), ", ")+", a comma-separated list, or all")
			asJSON := fs.Bool("json", false, "print the reports as JSON")
			tp := intArg(fs, "tp", 0, 1, maxGPUs, "tensor-parallel size to check head and width divisibility for (vllm, sglang, trtllm)")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q", args)
				}
				if *model == "" {
					return Usagef("--model is required")
				}
				if *tp < 0 {
					return Usagef("--tp %d: want a positive tensor-parallel size", *tp)
				}
				if *engine == "" {
					return Usagef("--engine is required (%s or all)", strings.Join(export.Engines(), ", "))
				}
				engines, err := export.ParseEngines(*engine)
				if err != nil {
					return Usagef("--engine: %v (or a comma-separated list, or all)", err)
				}
				dir, err := checkpointDir(*model)
				if err != nil {
					return err
				}
				reports, failed, err := export.ValidateEngines(ctx, dir, engines, export.Options{TP: *tp})
				if err != nil {
					return err
				}
				if *asJSON {
					if err := writeJSON(env.Stdout, reports); err != nil {
						return err
					}
				} else {
					for _, r := range reports {
						status := "OK"
						if !r.OK() {
							status = fmt.Sprintf("FAIL (%d violation(s))", len(r.Violations))
						}
						fmt.Fprintf(env.Stdout, "%s: %s, %d layers: %s\n", r.Engine, r.Arch, r.Layers, status)
						for _, v := range r.Violations {
							fmt.Fprintf(env.Stdout, "  error: %s\n", v)
						}
						for _, v := range r.Warnings {
							fmt.Fprintf(env.Stdout, "  warning: %s\n", v)
						}
						if needsRemoteCode(r) {
							fmt.Fprintf(env.Stdout, "  hint: %s\n", remoteCodeHint)
						}
					}
				}
				if failed > 0 {
					return &ExitError{Code: 1, Msg: fmt.Sprintf("%s breaks the rules of %d of %d engine(s)", *model, failed, len(engines))}
				}
				return nil
			}
		},
	})
}

// remoteCodeHint says how a DeciLM child comes to load in transformers.
// transformers has no class of its own for DeciLM: model_type nemotron-nas
// is not in CONFIG_MAPPING_NAMES (src/transformers/models/auto/
// configuration_auto.py), so it loads the child only through config.json's
// auto_map, whose "module.Class" references
// dynamic_module_utils.get_class_from_dynamic_module reads from module.py
// in the checkpoint directory ("repo--module.Class" from that Hub
// repository instead). prune writes the configuration module itself
// (package prune/remotecode), which is all the serving engines need; the
// modeling module AutoModelForCausalLM needs is not ours to ship, so a
// DeciLM child fails hf until one is added; the verdict is right, and this
// says what to do.
const remoteCodeHint = "transformers has no built-in DeciLM (model_type nemotron-nas): it loads the child only with trust_remote_code " +
	"and the auto_map modules beside the weights; prune writes the configuration module (configuration_decilm.py), " +
	"and transformers' AutoModelForCausalLM needs a modeling module besides: add it when pruning (autocompress prune ... --add-files modeling_decilm.py, " +
	"from a DeciLM model repository, e.g. nvidia/Llama-3_1-Nemotron-51B-Instruct, after checking its licence; prune then names it in auto_map), " +
	"or leave hf out of --engine when the child is served by vLLM, SGLang, TensorRT-LLM or llama.cpp"

// needsRemoteCode reports whether r fails for the remote-code files only.
func needsRemoteCode(r *export.Report) bool {
	if len(r.Violations) == 0 {
		return false
	}
	for _, v := range r.Violations {
		if v.Rule != "remote-code" {
			return false
		}
	}
	return true
}

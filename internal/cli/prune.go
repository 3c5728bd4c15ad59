package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/human"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/prune"
)

func init() {
	Register(&Command{
		Name:  "prune",
		Usage: "--model DIR (--plan plan.json | --scores scores.safetensors --keep-hidden N --keep-heads N --keep-ffn N --drop-layers N | --keep-experts N [--expert-scores F] [--lower-top-k]) --out DIR [--engine vllm|sglang|trtllm|llamacpp|hf|LIST|all] [--format native|decilm|padded] [--tp N] [--add-files F,...] [--force] [--json]",
		Short: "write a pruned child checkpoint from a pruning plan",
		Long: `prune slices a HuggingFace checkpoint (config.json + safetensors) to what a
pruning plan keeps: hidden channels, query heads (within their KV groups), KV
groups, MLP neurons, Mamba heads, whole layers or sub-blocks. The plan format is
documented in prune/PLAN.md. Instead of --plan, --scores builds a uniform plan
from importance scores (autocompress importance) and --keep-* targets, keeping
the top-scoring units (query heads ranked within their KV groups) and dropping
the layers of lowest block influence; --keep-experts N (alone or with --scores)
keeps the N highest-ranked routed experts of every MoE layer, by --expert-scores
or the structural prior of the weights; --write-plan saves the plan.

The child is written one tensor at a time (memory stays at a few MiB whatever
the model size), sharded like the parent, with a config.json that matches the
tensor shapes exactly and the tokenizer and other files copied through. It is
built in a temporary directory beside --out and moved into place only after it
passed the --engine's shape rules (see 'autocompress validate'); an interrupted
or failed run leaves nothing behind. An existing --out (or --write-plan file)
is replaced only with --force.

Formats: native (the parent's architecture; every layer of a kind must keep
the same widths), decilm (Llama family: DeciLMForCausalLM block_configs with
per-layer KV groups and FFN widths, zero-padded to multiples of 256, and
removed sub-blocks), padded (per-layer widths zero-padded to the widest layer
so the native architecture can hold them; the function is unchanged).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "parent checkpoint `directory` (config.json + safetensors), or \"parent\" for the embedded parent")
			planPath := fs.String("plan", "", "pruning plan `file` (JSON, see prune/PLAN.md)")
			out := fs.String("out", "", "output `directory` for the child")
			engine := fs.String("engine", "", "serving engine(s) the child must load in: "+strings.Join(export.Engines(), ", ")+", a comma-separated list, or all (default: the plan's, else only config/tensor agreement is checked)")
			format := fs.String("format", "", "output format: native, decilm or padded (default: the plan's, else native)")
			force := fs.Bool("force", false, "replace an existing --out (and --write-plan file)")
			addFiles := fs.String("add-files", "", "comma-separated `files` to copy into the child, e.g. a DeciLM modeling_decilm.py for --engine hf (prune writes the configuration module itself)")
			tp := intArg(fs, "tp", 0, 1, maxGPUs, "tensor-parallel size the child will be served with (checks head and width divisibility)")
			asJSON := fs.Bool("json", false, "print the result as JSON")
			scores := fs.String("scores", "", "build the plan from an importance `file` (autocompress importance output) instead of --plan")
			keepHidden := intArg(fs, "keep-hidden", 0, 0, maxWidth, "with --scores: hidden channels to keep (0: all)")
			keepHeads := intArg(fs, "keep-heads", 0, 0, maxWidth, "with --scores: query heads to keep per layer, a multiple of the KV groups (0: all)")
			keepFFN := intArg(fs, "keep-ffn", 0, 0, maxWidth, "with --scores: MLP neurons to keep per layer (0: all)")
			dropLayers := intArg(fs, "drop-layers", 0, 0, maxLayers, "with --scores: layers to drop, lowest block influence first")
			writePlan := fs.String("write-plan", "", "with --scores or --keep-experts: also write the generated plan to this `file`")
			keepExperts := intArg(fs, "keep-experts", 0, 0, maxWidth, "routed experts to keep in every MoE layer, the highest by --expert-scores (alone or with --scores; 0: all)")
			expertScores := fs.String("expert-scores", "", "with --keep-experts: expert scores `file` (REAP, routing frequency or structural; prune/PLAN.md#experts); default: the structural prior of --model's weights")
			lowerTopK := fs.Bool("lower-top-k", false, "with --keep-experts: allow fewer experts than the router's top-k, lowering the top-k to them")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q", args)
				}
				switch {
				case *model == "":
					return Usagef("--model is required")
				case *planPath == "" && *scores == "" && *keepExperts == 0:
					return Usagef("--plan (or --scores with --keep-* targets, or --keep-experts) is required")
				case *planPath != "" && *keepExperts != 0:
					return Usagef("--keep-experts builds a plan: list the experts in --plan's \"experts\" instead, or drop --plan")
				case *keepExperts == 0 && (*expertScores != "" || *lowerTopK):
					return Usagef("--expert-scores and --lower-top-k need --keep-experts")
				case *planPath != "" && *scores != "":
					return Usagef("give --plan or --scores, not both")
				case *scores == "" && (*keepHidden != 0 || *keepHeads != 0 || *keepFFN != 0 || *dropLayers != 0):
					return Usagef("--keep-hidden, --keep-heads, --keep-ffn and --drop-layers need --scores")
				case *scores == "" && *keepExperts == 0 && *writePlan != "":
					return Usagef("--write-plan needs --scores or --keep-experts")
				case *keepHidden < 0 || *keepHeads < 0 || *keepFFN < 0 || *dropLayers < 0:
					return Usagef("--keep-* and --drop-layers must not be negative")
				case *out == "":
					return Usagef("--out is required")
				}
				if *tp < 0 {
					return Usagef("--tp %d: want a positive tensor-parallel size", *tp)
				}
				if _, err := export.ParseEngines(*engine); err != nil {
					return Usagef("--engine: %v (or a comma-separated list, or all)", err)
				}
				switch *format {
				case "", prune.FormatNative, prune.FormatDeciLM, prune.FormatPadded:
				default:
					return Usagef("--format %q: want native, decilm or padded", *format)
				}
				dir, err := checkpointDir(*model)
				if err != nil {
					return err
				}
				var extra []string
				if *addFiles != "" {
					for _, f := range strings.Split(*addFiles, ",") {
						if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
							return Usagef("--add-files: %s is not a readable file", f)
						}
						extra = append(extra, f)
					}
				}
				var plan *prune.Plan
				if *scores != "" || *keepExperts != 0 {
					if *scores != "" {
						plan, err = prune.UniformPlan(dir, *scores, prune.Uniform{Hidden: *keepHidden, Heads: *keepHeads, Neurons: *keepFFN, DropLayers: *dropLayers})
						if err != nil {
							return err
						}
					} else {
						plan = &prune.Plan{Version: prune.PlanVersion}
					}
					if *keepExperts != 0 {
						if err := addExperts(ctx, env, plan, dir, *keepExperts, *expertScores, *lowerTopK); err != nil {
							return err
						}
					}
					if *writePlan != "" {
						if err := savePlan(*writePlan, plan, *force); err != nil {
							return err
						}
					}
				} else if plan, err = prune.LoadPlan(*planPath); err != nil {
					return err
				}
				term := progress.NewTerminal(env.Stderr)
				res, err := prune.Prune(ctx, prune.Options{
					Model: dir, Plan: plan, Out: *out, Force: *force,
					Format: *format, Engine: *engine, Progress: term.Report, TP: *tp, ExtraFiles: extra,
				})
				term.End()
				if err != nil {
					return err
				}
				c := res.Layout.Child
				eng := *engine
				if eng == "" {
					eng = plan.Engine
				}
				if *asJSON {
					type layer struct {
						Parent     int  `json:"parent"`
						Heads      int  `json:"heads,omitempty"`
						KVHeads    int  `json:"kv_heads,omitempty"`
						Width      int  `json:"mlp_width,omitempty"`
						MambaHeads int  `json:"mamba_heads,omitempty"`
						Experts    int  `json:"experts,omitempty"`
						TopK       int  `json:"experts_per_token,omitempty"`
						Padded     bool `json:"padded,omitempty"`
					}
					var ls []layer
					for i, l := range c.Layers {
						x := layer{Parent: res.Layout.Layers[i].Parent}
						if l.Attention != nil {
							x.Heads, x.KVHeads = l.Attention.Heads, l.Attention.KVHeads
						}
						if l.MLP != nil {
							x.Width = l.MLP.Width
						}
						if l.Mamba != nil {
							x.MambaHeads = l.Mamba.Heads
						}
						if l.MoE != nil {
							x.Experts, x.TopK = l.MoE.Experts, l.MoE.TopK
						}
						for _, v := range append(append(append([]int(nil), res.Layout.Layers[i].Heads...), res.Layout.Layers[i].Neurons...), res.Layout.Layers[i].KVHeads...) {
							if v < 0 {
								x.Padded = true
							}
						}
						ls = append(ls, x)
					}
					return writeJSON(env.Stdout, struct {
						Out          string   `json:"out"`
						Architecture string   `json:"architecture"`
						Format       string   `json:"format"`
						Engine       string   `json:"engine"`
						Hidden       int      `json:"hidden"`
						Layers       []layer  `json:"layers"`
						Files        []string `json:"files"`
						Tensors      int      `json:"tensors"`
						Bytes        int64    `json:"bytes"`
						Notes        []string `json:"notes,omitempty"`
					}{res.Dir, c.Arch, res.Layout.Format, eng, c.Hidden, ls, res.Files, res.Tensors, res.Bytes, res.Layout.Notes})
				}
				checked := "config and tensors agree"
				if eng != "" {
					checked = "validated for " + eng
				}
				fmt.Fprintf(env.Stdout, "wrote %s: %s (%s format), %d layers, hidden %d, %d tensors, %s in %s; %s\n",
					res.Dir, c.Arch, res.Layout.Format, len(c.Layers), c.Hidden, res.Tensors, human.Bytes(res.Bytes),
					strings.Join(res.Files, ", "), checked)
				for _, n := range res.Layout.Notes {
					fmt.Fprintf(env.Stdout, "note: %s\n", n)
				}
				return nil
			}
		},
	})
}

// addExperts adds to plan the keep experts of every MoE layer of the
// checkpoint in dir, ranked by the scores file, else by the structural
// prior of the weights (said on stderr).
func addExperts(ctx context.Context, env *Env, plan *prune.Plan, dir string, keep int, scoresPath string, lowerTopK bool) error {
	m, err := architecture.Load(dir)
	if err != nil {
		return err
	}
	var es *importance.ExpertScores
	if scoresPath != "" {
		if es, err = importance.LoadExperts(scoresPath); err != nil {
			return Usagef("--expert-scores: %v", err)
		}
		if err := es.Check(m); err != nil {
			return Usagef("--expert-scores %s: %v", scoresPath, err)
		}
	} else {
		if es, err = importance.StructuralExperts(ctx, dir, m); err != nil {
			return fmt.Errorf("the experts' structural prior: %w", err)
		}
		fmt.Fprintln(env.Stderr, "prune: experts ranked by the structural prior (router row norm × expert weight norm); --expert-scores gives REAP or routing-frequency scores")
	}
	plan.LowerTopK = plan.LowerTopK || lowerTopK
	if err := prune.KeepExperts(plan, m, keep, es.Layers); err != nil {
		return Usagef("--keep-experts %d: %v", keep, err)
	}
	return nil
}

func savePlan(path string, p *prune.Plan, force bool) error {
	f, err := output.CreateFile(path, force)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

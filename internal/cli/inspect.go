package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/internal/human"
	"github.com/autocompress/autocompress/modelref"
)

func init() {
	Register(&Command{
		Name:  "inspect",
		Usage: "--model PRESET|config.json|DIR [--json]",
		Short: "describe a model: layers, parameter counts, KV cache per token",
		Long: `inspect reads a model description (a built-in preset named by its HuggingFace
id, a config.json, or a checkpoint directory holding one) and prints its
architecture, a table of its layers (consecutive identical layers grouped),
exact parameter counts (total, active for MoE, embedding, LM head) and the KV
cache it needs per token at bf16 (2 bytes per element; sliding-window layers
counted in full).

With --json it prints the same facts, one record per layer, for scripts.
Run 'autocompress inspect --model list' to list the presets.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "preset name (HF id), config.json, checkpoint directory or \"parent\"; 'list' lists the names every command accepts")
			asJSON := fs.Bool("json", false, "print JSON instead of text")
			return func(_ context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("inspect takes no arguments, got %q", args)
				}
				if *model == "" {
					return Usagef("--model is required (a preset such as meta-llama/Llama-2-7b-hf, a config.json or a checkpoint directory)")
				}
				if *model == "list" {
					return listPresets(env.Stdout, *asJSON)
				}
				m, err := modelArch(*model)
				if err != nil {
					return err
				}
				r := inspectModel(m)
				if err := r.addWeights(*model, m); err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(env.Stdout, r)
				}
				return r.writeText(env.Stdout)
			}
		},
	})
}

func listPresets(w io.Writer, asJSON bool) error {
	names := modelref.Names()
	if asJSON {
		return writeJSON(w, names)
	}
	for _, n := range names {
		fmt.Fprintln(w, n)
	}
	return nil
}

// inspectReport is the --json output of inspect.
type inspectReport struct {
	Name           string `json:"name,omitempty"`
	Arch           string `json:"arch"`
	ModelType      string `json:"model_type"`
	Hidden         int    `json:"hidden_size"`
	Vocab          int    `json:"vocab_size"`
	NumLayers      int    `json:"num_layers"`
	TiedEmbeddings bool   `json:"tied_embeddings"`
	DType          string `json:"dtype,omitempty"` // config.json's torch_dtype
	// StoredDTypes are the element types of a checkpoint's tensors (none
	// for a config or preset); NativeDType is what the native engine
	// computes in when it runs the model (empty when it cannot).
	StoredDTypes    []string       `json:"stored_dtypes,omitempty"`
	NativeDType     string         `json:"native_compute_dtype,omitempty"`
	MaxPositions    int            `json:"max_position_embeddings"`
	Uniform         bool           `json:"uniform"`
	Format          string         `json:"config_format"`
	Params          paramsReport   `json:"params"`
	KVBytesPerToken int64          `json:"kv_bytes_per_token_bf16"`
	SSMConvElems    int64          `json:"ssm_conv_state_elems_per_seq,omitempty"`
	SSMStateElems   int64          `json:"ssm_state_elems_per_seq,omitempty"`
	Layers          []layerReport  `json:"layers"`
	LayerKinds      map[string]int `json:"layer_kinds"`
}

type paramsReport struct {
	Total        int64 `json:"total"`
	Active       int64 `json:"active"`
	Embedding    int64 `json:"embedding"`
	LMHead       int64 `json:"lm_head"`
	NonEmbedding int64 `json:"non_embedding"`
	Experts      int64 `json:"routed_experts"`
}

type layerReport struct {
	Index     int              `json:"index"`
	Kind      string           `json:"kind"`
	Attention *attentionReport `json:"attention,omitempty"`
	MLP       *mlpReport       `json:"mlp,omitempty"`
	Mamba     *mambaReport     `json:"mamba,omitempty"`
	MoE       *moeReport       `json:"moe,omitempty"`
	Params    int64            `json:"params"`
	Active    int64            `json:"active_params"`
	KVBytes   int64            `json:"kv_bytes_per_token_bf16"`
}

type attentionReport struct {
	Heads         int  `json:"heads"`
	KVHeads       int  `json:"kv_heads"`
	HeadDim       int  `json:"head_dim"`
	SlidingWindow int  `json:"sliding_window,omitempty"`
	QKNorm        bool `json:"qk_norm,omitempty"`
	QKVBias       bool `json:"qkv_bias,omitempty"`
	OutBias       bool `json:"out_bias,omitempty"`
	Sinks         bool `json:"sinks,omitempty"`
}

type mlpReport struct {
	Width      int    `json:"width"`
	Gated      bool   `json:"gated"`
	Activation string `json:"activation"`
}

type mambaReport struct {
	Heads     int `json:"heads"`
	HeadDim   int `json:"head_dim"`
	StateSize int `json:"state_size"`
	Groups    int `json:"groups"`
	Conv      int `json:"conv_kernel"`
}

type moeReport struct {
	Experts     int    `json:"experts"`
	TopK        int    `json:"top_k"`
	ExpertWidth int    `json:"expert_width"`
	SharedWidth int    `json:"shared_width,omitempty"`
	LatentSize  int    `json:"latent_size,omitempty"`
	Gated       bool   `json:"gated"`
	Activation  string `json:"activation"`
}

func inspectModel(m *architecture.Model) *inspectReport {
	p := m.Params()
	format := architecture.FormatFor(m)
	if format == architecture.Native && m.Family().PerLayer {
		format = architecture.DeciLMFormat
	}
	r := &inspectReport{
		Name: m.Name, Arch: m.Arch, ModelType: m.ModelType, Hidden: m.Hidden, Vocab: m.Vocab,
		NumLayers: len(m.Layers), TiedEmbeddings: m.TiedEmbeddings, DType: m.DType, MaxPositions: m.MaxPositions,
		Uniform: m.Uniform(), Format: format.String(),
		Params: paramsReport{Total: p.Total, Active: p.Active, Embedding: p.Embedding, LMHead: p.LMHead,
			NonEmbedding: p.NonEmbedding(), Experts: p.Experts},
		KVBytesPerToken: 2 * m.KVElemsPerToken(),
		LayerKinds:      map[string]int{},
	}
	r.SSMConvElems, r.SSMStateElems = m.SSMStateElems()
	for i, l := range m.Layers {
		lr := layerReport{Index: i, Kind: l.Kind(), Params: p.PerLayer[i], Active: p.ActivePerLayer[i]}
		r.LayerKinds[lr.Kind]++
		if a := l.Attention; a != nil {
			lr.Attention = &attentionReport{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, SlidingWindow: a.SlidingWindow,
				QKNorm: a.QKNorm, QKVBias: a.QKVBias, OutBias: a.OutBias, Sinks: a.Sinks}
			lr.KVBytes = 2 * 2 * int64(a.KVHeads) * int64(a.HeadDim)
		}
		if x := l.MLP; x != nil {
			lr.MLP = &mlpReport{Width: x.Width, Gated: x.Gated, Activation: x.Activation}
		}
		if x := l.Mamba; x != nil {
			lr.Mamba = &mambaReport{Heads: x.Heads, HeadDim: x.HeadDim, StateSize: x.StateSize, Groups: x.Groups, Conv: x.ConvKernel}
		}
		if x := l.MoE; x != nil {
			lr.MoE = &moeReport{Experts: x.Experts, TopK: x.TopK, ExpertWidth: x.ExpertWidth, SharedWidth: x.SharedWidth,
				LatentSize: x.LatentSize, Gated: x.Gated, Activation: x.Activation}
		}
		r.Layers = append(r.Layers, lr)
	}
	return r
}

// rowKey is what must match for consecutive layers to share a table row.
func (l layerReport) rowKey() string {
	c := l
	c.Index = 0
	b, _ := json.Marshal(c)
	return string(b)
}

func (r *inspectReport) writeText(w io.Writer) error {
	name := r.Name
	if name == "" {
		name = "(unnamed)"
	}
	tied := "no"
	if r.TiedEmbeddings {
		tied = "yes"
	}
	fmt.Fprintf(w, "model        %s\n", name)
	fmt.Fprintf(w, "arch         %s (%s), %d layers, hidden %d, vocab %d, tied embeddings: %s\n",
		r.Arch, r.ModelType, r.NumLayers, r.Hidden, r.Vocab, tied)
	if r.DType != "" || len(r.StoredDTypes) > 0 {
		fmt.Fprintf(w, "dtype        %s\n", r.dtypeText())
	}
	fmt.Fprintf(w, "positions    %d (max_position_embeddings)\n", r.MaxPositions)
	uni := "no: per-layer shapes"
	if r.Uniform {
		uni = "yes"
	}
	fmt.Fprintf(w, "uniform      %s (config format: %s)\n", uni, r.Format)
	p := r.Params
	fmt.Fprintf(w, "params       total %s (%s)\n", human.Thousands(p.Total), human.Count(float64(p.Total)))
	if p.Active != p.Total {
		fmt.Fprintf(w, "             active %s (%s) per token; routed experts %s\n", human.Thousands(p.Active), human.Count(float64(p.Active)), human.Thousands(p.Experts))
	}
	fmt.Fprintf(w, "             embedding %s, lm head %s, non-embedding %s\n", human.Thousands(p.Embedding), human.Thousands(p.LMHead), human.Thousands(p.NonEmbedding))
	fmt.Fprintf(w, "kv cache     %s bytes per token at bf16 (%s)\n", human.Thousands(r.KVBytesPerToken), human.Bytes(r.KVBytesPerToken))
	if r.SSMStateElems > 0 {
		b := 4 * (r.SSMConvElems + r.SSMStateElems)
		fmt.Fprintf(w, "mamba state  %s conv + %s ssm elements per sequence (%s at fp32)\n", human.Thousands(r.SSMConvElems), human.Thousands(r.SSMStateElems), human.Bytes(b))
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "layers\tkind\theads/kv/dim\twindow\tffn\tmamba h×d/state/groups\tmoe experts/top-k/width/shared\tparams/layer")
	for i := 0; i < len(r.Layers); {
		j := i + 1
		for j < len(r.Layers) && r.Layers[j].rowKey() == r.Layers[i].rowKey() {
			j++
		}
		l := r.Layers[i]
		rng := strconv.Itoa(i)
		if j-i > 1 {
			rng = fmt.Sprintf("%d-%d", i, j-1)
		}
		att, win, ffn, mamba, moe := "-", "-", "-", "-", "-"
		if a := l.Attention; a != nil {
			att = fmt.Sprintf("%d/%d/%d", a.Heads, a.KVHeads, a.HeadDim)
			if a.SlidingWindow > 0 {
				win = strconv.Itoa(a.SlidingWindow)
			}
		}
		if x := l.MLP; x != nil {
			ffn = strconv.Itoa(x.Width)
			if !x.Gated {
				ffn += " (" + x.Activation + ")"
			}
		}
		if x := l.Mamba; x != nil {
			mamba = fmt.Sprintf("%d×%d/%d/%d", x.Heads, x.HeadDim, x.StateSize, x.Groups)
		}
		if x := l.MoE; x != nil {
			moe = fmt.Sprintf("%d/%d/%d/%d", x.Experts, x.TopK, x.ExpertWidth, x.SharedWidth)
			if x.LatentSize > 0 {
				moe += fmt.Sprintf(" latent %d", x.LatentSize)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rng, l.Kind, att, win, ffn, mamba, moe, human.Thousands(l.Params))
		i = j
	}
	return tw.Flush()
}

// nativeComputeDType is what the native engine holds and computes every
// parameter in (package engine: one float32 slab, converted on load).
const nativeComputeDType = "float32"

// addWeights records the element types of model's tensors, when it is a
// checkpoint with weights, and the native engine's compute type when that
// engine loads it: the config's torch_dtype alone (bfloat16 for the
// parent) is not what the native engine runs (float32).
func (r *inspectReport) addWeights(model string, m *architecture.Model) error {
	ref, err := resolveModel(model)
	if err != nil {
		return err
	}
	dir, err := ref.Checkpoint()
	if err != nil {
		return nil // a config or preset: no weights to describe
	}
	rd, err := checkpoint.Open(dir)
	if err != nil {
		return nil // a folder with config.json and no (readable) weights: inspect describes its config
	}
	defer rd.Close()
	seen := map[string]bool{}
	for _, t := range rd.Tensors() {
		if d := string(t.DType); !seen[d] {
			seen[d] = true
			r.StoredDTypes = append(r.StoredDTypes, d)
		}
	}
	sort.Strings(r.StoredDTypes)
	if caps, err := export.Lookup(string(estimate.Native)); err == nil && caps.Loads(m, 1) {
		r.NativeDType = nativeComputeDType
	}
	return nil
}

// dtypeText says what the config declares, what the tensors are stored in
// and what the native engine computes in, where they are known.
func (r *inspectReport) dtypeText() string {
	var parts []string
	if r.DType != "" {
		parts = append(parts, r.DType+" (config)")
	}
	if len(r.StoredDTypes) > 0 {
		parts = append(parts, "stored "+strings.Join(r.StoredDTypes, ", "))
	}
	if r.NativeDType != "" {
		parts = append(parts, "the native engine runs it in "+r.NativeDType)
	}
	return strings.Join(parts, "; ")
}

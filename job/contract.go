package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// Version is the contract version this package writes and reads (2:
// layers may hold an MoE block; 3: a sigmoid-routed MoE block carries its
// group limit and scaling, MoEShape.Groups, TopKGroups and Scale).
const Version = 3

// ResultVersion is the version of result.json, which the contract's
// versions 2 and 3 left unchanged.
const ResultVersion = 1

// ContractFile is the contract's name in a job directory.
const ContractFile = "contract.json"

// Kind is what a job computes.
type Kind string

// The job kinds.
const (
	Distill    Kind = "distill"    // train the student on the teacher's logits
	Importance Kind = "importance" // score the model's widths and layers
	Eval       Kind = "eval"       // held-out perplexity
	Proxy      Kind = "proxy"      // mean KL(teacher ‖ student), no training
)

// Kinds lists the kinds, in the contract's order.
var Kinds = []Kind{Distill, Importance, Eval, Proxy}

// pair reports whether the kind takes a teacher and a student (else one model).
func (k Kind) pair() bool { return k == Distill || k == Proxy }

// Contract is contract.json: everything a trainer needs to run one job.
// CONTRACT.md documents every field.
type Contract struct {
	Version int    `json:"version"`
	Kind    Kind   `json:"kind"`
	Engine  string `json:"engine"`

	Teacher *Model `json:"teacher,omitempty"` // distill, proxy
	Student *Model `json:"student,omitempty"` // distill, proxy
	Model   *Model `json:"model,omitempty"`   // importance, eval

	Tokenizer Files  `json:"tokenizer"`
	Data      Data   `json:"data"`
	Recipe    Recipe `json:"recipe"`

	WorldSize       int     `json:"world_size"`
	CheckpointEvery int     `json:"checkpoint_every"`
	Outputs         Outputs `json:"outputs"`
}

// Files is a directory of the job and the hash of each of its files
// (checkpoint.HashFiles over that one file, keyed by its name relative to
// Path).
type Files struct {
	Path   string            `json:"path"`
	SHA256 map[string]string `json:"sha256"`
}

// Model is a checkpoint directory of the job with its exact shape.
type Model struct {
	Files
	Shape Shape `json:"shape"`
}

// Shape is a model's exact per-layer shape.
type Shape struct {
	Arch   string       `json:"arch"`   // config.json's class, e.g. LlamaForCausalLM, DeciLMForCausalLM
	Format string       `json:"format"` // native or decilm
	Vocab  int          `json:"vocab"`
	Hidden int          `json:"hidden"`
	Tied   bool         `json:"tied"`
	Layers []LayerShape `json:"layers"`
}

// LayerShape is one decoder layer; a nil sub-block was removed.
type LayerShape struct {
	Attention *AttentionShape `json:"attention"`
	MLP       *MLPShape       `json:"mlp"`
	// Mamba is a hybrid's Mamba2 mixer (Nemotron-H), the layer's only
	// block; absent from other layers.
	Mamba *MambaShape `json:"mamba,omitempty"`
	// MoE is a mixture-of-experts feed-forward block (Qwen3-MoE,
	// Mixtral), in place of MLP (which is then null); absent from other
	// layers.
	MoE *MoEShape `json:"moe,omitempty"`
}

// MoEShape is a mixture-of-experts block: Experts routed experts (the
// ones kept), each a gated MLP of Width, TopK of them per token, chosen by
// Router; SharedWidth is the shared experts' total width (0: none).
type MoEShape struct {
	Experts int    `json:"experts"`
	TopK    int    `json:"top_k"`
	Width   int    `json:"width"`
	Router  string `json:"router"`
	// NormTopKProb: the k weights are divided by their sum (Mixtral
	// always; Qwen3-MoE when config.json's norm_topk_prob is true).
	NormTopKProb bool `json:"norm_topk_prob"`
	SharedWidth  int  `json:"shared_width,omitempty"`
	// Groups, TopKGroups and Scale are RouterSigmoid's constants (zero
	// for the other routers): the experts fall into Groups (n_group)
	// equal groups of consecutive experts, a token's k are chosen within
	// its TopKGroups (topk_group) groups of the largest sums of their 2
	// best corrected scores, and the k weights are multiplied by Scale
	// (routed_scaling_factor), as transformers'
	// NemotronHMoE.route_tokens_to_experts computes them.
	Groups     int     `json:"n_group,omitempty"`
	TopKGroups int     `json:"topk_group,omitempty"`
	Scale      float64 `json:"routed_scaling_factor,omitempty"`
}

// routingError says what is wrong with x's router constants ("" when
// nothing): for RouterSigmoid, whole groups of at least 2 experts, 1 <=
// topk_group <= n_group, top_k within the kept groups' experts and a
// positive finite scale; none for the other routers.
func (x *MoEShape) routingError() string {
	if x.Router != RouterSigmoid {
		if x.Groups != 0 || x.TopKGroups != 0 || x.Scale != 0 {
			return fmt.Sprintf("n_group %d, topk_group %d, routed_scaling_factor %g with router %s: want them absent (they are %s's)", x.Groups, x.TopKGroups, x.Scale, x.Router, RouterSigmoid)
		}
		return ""
	}
	switch {
	case x.Groups < 1 || x.Experts%x.Groups != 0 || x.Experts/x.Groups < 2:
		return fmt.Sprintf("n_group %d with %d experts: want a divisor of the experts leaving at least 2 per group (prune experts in whole groups)", x.Groups, x.Experts)
	case x.TopKGroups < 1 || x.TopKGroups > x.Groups:
		return fmt.Sprintf("topk_group %d: want 1 <= topk_group <= n_group (%d)", x.TopKGroups, x.Groups)
	case x.TopK > x.TopKGroups*(x.Experts/x.Groups):
		return fmt.Sprintf("top_k %d exceeds the %d experts of the topk_group %d kept group(s) of %d: lower top_k or keep more experts per group", x.TopK, x.TopKGroups*(x.Experts/x.Groups), x.TopKGroups, x.Experts/x.Groups)
	case !(x.Scale > 0) || math.IsInf(x.Scale, 0):
		return fmt.Sprintf("routed_scaling_factor %g: want a positive finite number", x.Scale)
	}
	return ""
}

// Router rules of an MoE block (MoEShape.Router), as
// architecture.RouterRule describes them.
const (
	// RouterSoftmaxTopK: softmax over every expert in float32, then the k
	// largest (Mixtral, Qwen3-MoE).
	RouterSoftmaxTopK = "softmax_topk"
	// RouterTopKSoftmax: the k largest logits, then softmax over them
	// (gpt-oss).
	RouterTopKSoftmax = "topk_softmax"
	// RouterSigmoid: sigmoid scores with e_score_correction_bias
	// (DeepSeek-V3, Nemotron-3).
	RouterSigmoid = "sigmoid_corrected"
)

// MambaShape is a Mamba2 mixer's widths.
type MambaShape struct {
	Heads   int `json:"heads"`
	HeadDim int `json:"head_dim"`
	State   int `json:"state"`
	Groups  int `json:"groups"`
	Conv    int `json:"conv"`
}

// AttentionShape is a layer's attention widths.
type AttentionShape struct {
	Heads   int `json:"heads"`
	KVHeads int `json:"kv_heads"`
	HeadDim int `json:"head_dim"`
}

// MLPShape is a layer's feed-forward width.
type MLPShape struct {
	Width int `json:"width"`
}

// Shape formats.
const (
	FormatNative = "native"
	FormatDeciLM = "decilm"
)

// Uniform reports whether every layer has the first layer's shape or, for
// a family whose native config mixes layer kinds (a hybrid,
// architecture.Family.Hybrid: Nemotron-H, whose layers are each one block;
// an MoE family, whose config may keep dense MLP layers: Qwen3-MoE's
// mlp_only_layers), whether every block of a kind has one shape.
func (s Shape) Uniform() bool {
	if f, ok := architecture.Lookup(s.Arch); ok && (f.Hybrid || f.Router != architecture.RouterRule{}) {
		var a *AttentionShape
		var m *MLPShape
		var x *MambaShape
		var e *MoEShape
		for _, l := range s.Layers {
			if !sameBlock(&a, l.Attention) || !sameBlock(&m, l.MLP) || !sameBlock(&x, l.Mamba) || !sameBlock(&e, l.MoE) {
				return false
			}
		}
		return true
	}
	for _, l := range s.Layers {
		if !sameLayer(l, s.Layers[0]) {
			return false
		}
	}
	return true
}

// sameBlock reports whether block b (nil: absent) has the shape *first
// holds, recording b as the first when none was seen.
func sameBlock[T comparable](first **T, b *T) bool {
	if b == nil {
		return true
	}
	if *first == nil {
		*first = b
		return true
	}
	return **first == *b
}

func sameLayer(a, b LayerShape) bool {
	return samePtr(a.Attention, b.Attention) && samePtr(a.MLP, b.MLP) && samePtr(a.Mamba, b.Mamba) && samePtr(a.MoE, b.MoE)
}

// samePtr reports whether a and b are both absent or equal.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Equal reports whether two shapes are the same, and if not, the first
// difference in words.
func (s Shape) Equal(o Shape) (bool, string) {
	switch {
	case s.Vocab != o.Vocab || s.Hidden != o.Hidden || s.Tied != o.Tied:
		return false, fmt.Sprintf("vocab %d, hidden %d, tied %v against vocab %d, hidden %d, tied %v", s.Vocab, s.Hidden, s.Tied, o.Vocab, o.Hidden, o.Tied)
	case len(s.Layers) != len(o.Layers):
		return false, fmt.Sprintf("%d layers against %d", len(s.Layers), len(o.Layers))
	}
	for i := range s.Layers {
		if !sameLayer(s.Layers[i], o.Layers[i]) {
			return false, fmt.Sprintf("layer %d is %s against %s", i, s.Layers[i], o.Layers[i])
		}
	}
	return true, ""
}

func (l LayerShape) String() string {
	a, m := "no attention", "no MLP"
	if l.Attention != nil {
		a = fmt.Sprintf("attention %d heads (%d KV) of %d", l.Attention.Heads, l.Attention.KVHeads, l.Attention.HeadDim)
	}
	if l.MLP != nil {
		m = fmt.Sprintf("MLP %d", l.MLP.Width)
	}
	if x := l.Mamba; x != nil {
		return fmt.Sprintf("Mamba2 %d heads of %d (%d groups, state %d, conv %d)", x.Heads, x.HeadDim, x.Groups, x.State, x.Conv)
	}
	if x := l.MoE; x != nil {
		m = fmt.Sprintf("MoE %d experts of %d, top-%d (%s, norm_topk_prob %v)", x.Experts, x.Width, x.TopK, x.Router, x.NormTopKProb)
		if x.SharedWidth > 0 {
			m += fmt.Sprintf(", shared %d", x.SharedWidth)
		}
		if x.Router == RouterSigmoid {
			m += fmt.Sprintf(", groups %d keep %d, scale %g", x.Groups, x.TopKGroups, x.Scale)
		}
	}
	return a + ", " + m
}

// Data is the job's token shards.
type Data struct {
	Format    string            `json:"format"` // ShardNanoGPT or ShardMegatron
	DType     string            `json:"dtype"`  // uint16 or uint32 (nanogpt-bin); uint16 or int32 (megatron-indexed)
	SeqLen    int               `json:"seq_len"`
	Train     []string          `json:"train,omitempty"`
	Valid     []string          `json:"valid,omitempty"`
	TrainRows int               `json:"train_rows"`
	ValidRows int               `json:"valid_rows"`
	SHA256    map[string]string `json:"sha256"`
}

// Shard formats.
const (
	ShardNanoGPT  = "nanogpt-bin"
	ShardMegatron = "megatron-indexed"
)

// Recipe is the optimisation and loss settings (CONTRACT.md).
type Recipe struct {
	Tokens      int64   `json:"tokens"`
	Steps       int     `json:"steps"`
	SeqLen      int     `json:"seq_len"`
	Batch       int     `json:"batch"`
	MicroBatch  int     `json:"micro_batch"`
	LR          float64 `json:"lr"`
	MinLR       float64 `json:"min_lr"`
	Warmup      int     `json:"warmup_steps"`
	Schedule    string  `json:"schedule"`
	WeightDecay float64 `json:"weight_decay"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	Clip        float64 `json:"clip"`
	Temperature float64 `json:"temperature"`
	KDWeight    float64 `json:"kd_weight"`
	CEWeight    float64 `json:"ce_weight"`
	TopK        int     `json:"top_k"`
	Seed        uint64  `json:"seed"`
	EvalRows    int     `json:"eval_rows"`

	// Optional keys the torch reference trainer reads (torchref):
	// ActivationCheckpointing recomputes each block in backward (what an
	// 8B job at sequence 4096 on one GPU needs); FSDP false keeps DDP
	// where FSDP2 exists (nil: FSDP2 where torch has it); SharedVocab is the KD vocabulary [0, n) (0: the
	// smaller model's). For importance, as package importance's Options:
	// SkipRows scores the skip losses on that many whole sequences,
	// SkipPasses is the budget in equivalent forward passes (0 with
	// SkipRows 0: every sequence), NoSkipLoss and NoSubBlockSkipLoss
	// leave skip losses out.
	ActivationCheckpointing bool    `json:"activation_checkpointing,omitempty"`
	FSDP                    *bool   `json:"fsdp,omitempty"`
	SharedVocab             int     `json:"shared_vocab,omitempty"`
	SkipRows                int     `json:"skip_rows,omitempty"`
	SkipPasses              float64 `json:"skip_passes,omitempty"`
	NoSkipLoss              bool    `json:"no_skip_loss,omitempty"`
	NoSubBlockSkipLoss      bool    `json:"no_subblock_skip_loss,omitempty"`
}

// Outputs names what the job writes, relative to the job directory.
type Outputs struct {
	StepLog    string `json:"progress"` // progress.jsonl
	Result     string `json:"result"`
	Checkpoint string `json:"checkpoint,omitempty"`
	Resume     string `json:"resume"`
}

// DefaultOutputs are the names every emitted job uses.
func DefaultOutputs(k Kind) Outputs {
	o := Outputs{StepLog: "progress.jsonl", Result: "result.json", Resume: "resume"}
	if k == Distill {
		o.Checkpoint = "out"
	}
	return o
}

// ContractError is a contract that is not valid: Field names the JSON field.
type ContractError struct {
	Field string
	Msg   string
}

func (e *ContractError) Error() string { return "job contract: " + e.Field + ": " + e.Msg }

func bad(field, format string, a ...any) error {
	return &ContractError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Models returns the contract's models by role ("teacher", "student",
// "model"), in that order, skipping absent ones.
func (c *Contract) Models() []Role {
	var r []Role
	for _, x := range []Role{{"teacher", c.Teacher}, {"student", c.Student}, {"model", c.Model}} {
		if x.Model != nil {
			r = append(r, x)
		}
	}
	return r
}

// Role is a model of the contract with its field name.
type Role struct {
	Name  string
	Model *Model
}

// Validate checks the contract's own consistency (not the files: Verify
// does). Every problem is a *ContractError naming the field and what a
// valid value is.
func (c *Contract) Validate() error {
	if c.Version != Version {
		return bad("version", "%d: this autocompress reads version %d (emit the job again with this binary)", c.Version, Version)
	}
	known := false
	for _, k := range Kinds {
		known = known || c.Kind == k
	}
	if !known {
		return bad("kind", "%q: want one of distill, importance, eval, proxy", c.Kind)
	}
	if _, ok := LookupEngine(c.Engine); !ok {
		return bad("engine", "%q: want one of %s", c.Engine, strings.Join(EngineNames(), ", "))
	}
	if c.Kind.pair() {
		if c.Teacher == nil || c.Student == nil || c.Model != nil {
			return bad("teacher", "a %s job takes a teacher and a student and no model", c.Kind)
		}
	} else if c.Model == nil || c.Teacher != nil || c.Student != nil {
		return bad("model", "a %s job takes one model and no teacher or student", c.Kind)
	}
	for _, r := range c.Models() {
		if err := r.Model.validate(r.Name); err != nil {
			return err
		}
	}
	if c.Kind.pair() && c.Teacher.Shape.Vocab != c.Student.Shape.Vocab {
		return bad("student.shape.vocab", "%d differs from the teacher's %d: teacher and student share one tokenizer", c.Student.Shape.Vocab, c.Teacher.Shape.Vocab)
	}
	if err := c.Tokenizer.validate("tokenizer"); err != nil {
		return err
	}
	if err := c.Data.validate(c.Kind); err != nil {
		return err
	}
	if c.WorldSize < 1 || c.WorldSize > 65536 {
		return bad("world_size", "%d: want 1 to 65536 ranks", c.WorldSize)
	}
	if err := c.Recipe.validate(c.Kind, c.WorldSize, c.Data); err != nil {
		return err
	}
	if c.CheckpointEvery < 0 {
		return bad("checkpoint_every", "%d: want >= 0 steps (0: only at the end and on SIGTERM)", c.CheckpointEvery)
	}
	o := c.Outputs
	for _, f := range []struct{ name, v string }{{"outputs.progress", o.StepLog}, {"outputs.result", o.Result}, {"outputs.resume", o.Resume}} {
		if err := relPath(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Kind == Distill {
		if err := relPath("outputs.checkpoint", o.Checkpoint); err != nil {
			return err
		}
	}
	return nil
}

// relPath checks p is a clean relative slash path inside the job directory.
func relPath(field, p string) error {
	if p == "" {
		return bad(field, "empty: want a path relative to the job directory")
	}
	if strings.Contains(p, `\`) || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return bad(field, "%q: want a clean relative path with / inside the job directory", p)
	}
	return nil
}

func (f *Files) validate(field string) error {
	if err := relPath(field+".path", f.Path); err != nil {
		return err
	}
	if len(f.SHA256) == 0 {
		return bad(field+".sha256", "no files listed: every file of the directory needs its hash")
	}
	for name, h := range f.SHA256 {
		if err := relPath(field+".sha256", name); err != nil {
			return err
		}
		if !isHex64(h) {
			return bad(field+".sha256", "%s: %q is not 64 hex digits", name, h)
		}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

func (m *Model) validate(role string) error {
	if err := m.Files.validate(role); err != nil {
		return err
	}
	if _, ok := m.SHA256["config.json"]; !ok {
		return bad(role+".sha256", "no config.json listed: a checkpoint needs its config.json")
	}
	s := m.Shape
	field := role + ".shape"
	switch {
	case s.Arch == "":
		return bad(field+".arch", "empty: want config.json's class, e.g. LlamaForCausalLM")
	case s.Format != FormatNative && s.Format != FormatDeciLM:
		return bad(field+".format", "%q: want native or decilm", s.Format)
	case s.Vocab < 1 || s.Hidden < 1:
		return bad(field, "vocab %d, hidden %d: want positive", s.Vocab, s.Hidden)
	case len(s.Layers) == 0:
		return bad(field+".layers", "none: want one entry per decoder layer")
	case s.Format == FormatNative && !s.Uniform():
		return bad(field+".format", "native, but the layers differ: a per-layer shape is decilm")
	}
	for i, l := range s.Layers {
		if a := l.Attention; a != nil && (a.Heads < 1 || a.KVHeads < 1 || a.HeadDim < 1 || a.Heads%a.KVHeads != 0) {
			return bad(fmt.Sprintf("%s.layers[%d].attention", field, i), "%d heads, %d KV heads, head_dim %d: want positive with heads a multiple of kv_heads", a.Heads, a.KVHeads, a.HeadDim)
		}
		if x := l.Mamba; x != nil && (x.Heads < 1 || x.HeadDim < 1 || x.State < 1 || x.Groups < 1 || x.Conv < 1 || x.Heads%x.Groups != 0 || l.Attention != nil || l.MLP != nil) {
			return bad(fmt.Sprintf("%s.layers[%d].mamba", field, i), "%d heads of %d in %d groups, state %d, conv %d (with attention %v, MLP %v): want positive widths, heads a multiple of groups, and no other block in the layer", x.Heads, x.HeadDim, x.Groups, x.State, x.Conv, l.Attention != nil, l.MLP != nil)
		}
		if x := l.MoE; x != nil {
			f := fmt.Sprintf("%s.layers[%d].moe", field, i)
			switch {
			case l.MLP != nil || l.Mamba != nil:
				return bad(f, "with an MLP or a Mamba2 mixer: an MoE block takes the MLP's place (mlp null)")
			case x.Experts < 1 || x.Width < 1 || x.SharedWidth < 0:
				return bad(f, "%d experts of width %d, shared width %d: want at least one expert of positive width (a shared width >= 0)", x.Experts, x.Width, x.SharedWidth)
			case x.TopK < 1 || x.TopK > x.Experts:
				return bad(f+".top_k", "%d with %d experts: want 1 <= top_k <= experts (lower top_k when fewer experts than k are kept)", x.TopK, x.Experts)
			case x.Router != RouterSoftmaxTopK && x.Router != RouterTopKSoftmax && x.Router != RouterSigmoid:
				return bad(f+".router", "%q: want %s, %s or %s", x.Router, RouterSoftmaxTopK, RouterTopKSoftmax, RouterSigmoid)
			}
			if msg := x.routingError(); msg != "" {
				return bad(f, "%s", msg)
			}
		}
		if l.MLP != nil && l.MLP.Width < 1 {
			return bad(fmt.Sprintf("%s.layers[%d].mlp.width", field, i), "%d: want positive (a removed MLP is null)", l.MLP.Width)
		}
	}
	return nil
}

func (d *Data) validate(k Kind) error {
	switch {
	case d.Format != ShardNanoGPT && d.Format != ShardMegatron:
		return bad("data.format", "%q: want %s or %s", d.Format, ShardNanoGPT, ShardMegatron)
	case d.Format == ShardNanoGPT && d.DType != "uint16" && d.DType != "uint32":
		return bad("data.dtype", "%q: %s holds uint16 or uint32", d.DType, d.Format)
	case d.Format == ShardMegatron && d.DType != "uint16" && d.DType != "int32":
		return bad("data.dtype", "%q: %s holds uint16 or int32 here", d.DType, d.Format)
	case d.SeqLen < 1:
		return bad("data.seq_len", "%d: want positive", d.SeqLen)
	case k == Distill && (len(d.Train) == 0 || d.TrainRows < 1):
		return bad("data.train", "a distill job needs train shards with rows")
	case k != Distill && (len(d.Train) != 0 || d.TrainRows != 0):
		return bad("data.train", "a %s job reads data.valid only", k)
	case k != Distill && (len(d.Valid) == 0 || d.ValidRows < 1):
		return bad("data.valid", "a %s job needs valid shards with rows", k)
	case len(d.Valid) == 0 && d.ValidRows != 0:
		return bad("data.valid_rows", "%d rows but no valid shards", d.ValidRows)
	}
	for _, s := range append(append([]string{}, d.Train...), d.Valid...) {
		if err := relPath("data", s); err != nil {
			return err
		}
		for _, f := range ShardFiles(d.Format, s) {
			if !isHex64(d.SHA256[f]) {
				return bad("data.sha256", "%s: no hash (every shard file needs one)", f)
			}
		}
	}
	return nil
}

// ShardFiles returns the files of one listed shard: the .bin itself
// (nanogpt-bin), or the prefix's .bin and .idx (megatron-indexed).
func ShardFiles(format, shard string) []string {
	if format == ShardMegatron {
		return []string{shard + ".bin", shard + ".idx"}
	}
	return []string{shard}
}

func finite(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func (r *Recipe) validate(k Kind, world int, d Data) error {
	switch {
	case !finite(r.LR, r.MinLR, r.WeightDecay, r.Beta1, r.Beta2, r.Eps, r.Clip, r.Temperature, r.KDWeight, r.CEWeight):
		return bad("recipe", "every number must be finite")
	case r.SeqLen != d.SeqLen:
		return bad("recipe.seq_len", "%d differs from data.seq_len %d", r.SeqLen, d.SeqLen)
	case r.Batch < 1:
		return bad("recipe.batch", "%d: want at least 1 sequence per step", r.Batch)
	case r.Batch%world != 0:
		return bad("recipe.batch", "%d sequences is not a multiple of world_size %d: choose a batch the ranks divide (e.g. %d) or another world size", r.Batch, world, (r.Batch/world+1)*world)
	case r.MicroBatch != r.Batch/world:
		return bad("recipe.micro_batch", "%d: want batch / world_size = %d", r.MicroBatch, r.Batch/world)
	case r.EvalRows < 0:
		return bad("recipe.eval_rows", "%d: want >= 0", r.EvalRows)
	}
	if k != Distill {
		if r.Tokens != 0 || r.Steps != 0 {
			return bad("recipe.tokens", "a %s job trains nothing: want tokens and steps 0", k)
		}
		return nil
	}
	per := int64(r.Batch) * int64(r.SeqLen)
	switch {
	case r.Tokens < 1:
		return bad("recipe.tokens", "%d: want a positive number of training tokens", r.Tokens)
	case int64(r.Steps) != (r.Tokens+per-1)/per:
		return bad("recipe.steps", "%d: want ceil(tokens / (batch × seq_len)) = %d", r.Steps, (r.Tokens+per-1)/per)
	case d.TrainRows != r.Steps*r.Batch:
		return bad("data.train_rows", "%d: the shards hold steps × batch = %d rows, in step order", d.TrainRows, r.Steps*r.Batch)
	case r.LR <= 0 || r.MinLR < 0 || r.MinLR > r.LR:
		return bad("recipe.lr", "lr %g, min_lr %g: want 0 <= min_lr <= lr and lr > 0", r.LR, r.MinLR)
	case r.Warmup < 0 || r.Warmup > r.Steps:
		return bad("recipe.warmup_steps", "%d: want 0 to steps (%d)", r.Warmup, r.Steps)
	case r.Schedule != "cosine":
		return bad("recipe.schedule", "%q: want cosine (linear warm-up, cosine decay to min_lr)", r.Schedule)
	case r.WeightDecay < 0 || r.Clip < 0:
		return bad("recipe.weight_decay", "weight_decay %g, clip %g: want >= 0", r.WeightDecay, r.Clip)
	case r.Beta1 < 0 || r.Beta1 >= 1 || r.Beta2 < 0 || r.Beta2 >= 1 || r.Eps <= 0:
		return bad("recipe.beta1", "beta1 %g, beta2 %g, eps %g: want betas in [0, 1) and eps > 0", r.Beta1, r.Beta2, r.Eps)
	case r.Temperature <= 0:
		return bad("recipe.temperature", "%g: want > 0", r.Temperature)
	case r.KDWeight < 0 || r.CEWeight < 0 || r.KDWeight+r.CEWeight == 0:
		return bad("recipe.kd_weight", "kd_weight %g, ce_weight %g: want >= 0 and not both 0", r.KDWeight, r.CEWeight)
	case r.TopK < 0:
		return bad("recipe.top_k", "%d: want >= 0 (0: the full distribution)", r.TopK)
	case r.SharedVocab < 0:
		return bad("recipe.shared_vocab", "%d: want >= 0 (0: the smaller model's vocabulary)", r.SharedVocab)
	case r.SkipRows < 0:
		return bad("recipe.skip_rows", "%d: want >= 0 (0: as skip_passes says)", r.SkipRows)
	case r.SkipPasses != 0 && r.SkipPasses < 1:
		return bad("recipe.skip_passes", "%g: want 0 (every sequence) or at least 1 (the calibration pass itself)", r.SkipPasses)
	case r.SkipRows > 0 && r.SkipPasses > 0:
		return bad("recipe.skip_rows", "skip_rows %d and skip_passes %g: give one, not both", r.SkipRows, r.SkipPasses)
	}
	return nil
}

// Load reads and validates dir/contract.json.
func Load(dir string) (*Contract, error) {
	b, err := os.ReadFile(filepath.Join(dir, ContractFile))
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("job: %s: %w", filepath.Join(dir, ContractFile), err)
	}
	return c, nil
}

// Parse decodes and validates a contract; unknown fields are refused (a
// contract from a newer autocompress says so by its version first).
func Parse(b []byte) (*Contract, error) {
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("not a job contract: %w", err)
	}
	if probe.Version != Version {
		return nil, bad("version", "%d: this autocompress reads version %d (emit the job again with this binary)", probe.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Contract
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a job contract: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a job contract: data after the JSON object")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Marshal returns the contract as indented JSON with a trailing newline.
func (c *Contract) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	return append(b, '\n'), nil
}

// Save validates c and writes it to dir/contract.json; dir is a job
// directory being assembled (Emit's output.Dir), not a user's file.
func (c *Contract) Save(dir string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := c.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ContractFile), b, 0o644); err != nil { //output:inside
		return fmt.Errorf("job: %w", err)
	}
	return nil
}

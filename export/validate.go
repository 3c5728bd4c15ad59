package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
)

// Violation is one broken rule.
type Violation struct {
	Layer  int    `json:"layer"`            // layer index, -1 when global
	Tensor string `json:"tensor,omitempty"` // the tensor involved, if any
	Rule   string `json:"rule"`             // short rule id, e.g. "decilm-ffn-mult-only"
	Msg    string `json:"message"`          // what is wrong and how to fix it
}

func (v Violation) String() string {
	var b strings.Builder
	if v.Layer >= 0 {
		fmt.Fprintf(&b, "layer %d: ", v.Layer)
	}
	if v.Tensor != "" {
		fmt.Fprintf(&b, "tensor %s: ", v.Tensor)
	}
	fmt.Fprintf(&b, "%s [%s]", v.Msg, v.Rule)
	return b.String()
}

// Report is the result of validating one checkpoint for one engine.
type Report struct {
	Engine string `json:"engine"`
	Dir    string `json:"dir,omitempty"`
	Arch   string `json:"architecture,omitempty"`
	Layers int    `json:"layers"`
	// Violations make the engine fail to load the checkpoint (or load it
	// wrongly). Warnings are legal but worth knowing (alignment, KV page
	// sizes, rules marked "verify").
	Violations []Violation `json:"violations"`
	Warnings   []Violation `json:"warnings"`

	// quiet counts violations in failed instead of formatting them
	// (Capabilities.Loads); warnings are dropped.
	quiet  bool
	failed int
}

// OK reports whether there is no violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Err returns a *ValidationError when there are violations, else nil.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	return &ValidationError{Report: r}
}

func (r *Report) violate(layer int, tensor, rule, format string, a ...any) {
	if r.quiet {
		r.failed++
		return
	}
	r.Violations = append(r.Violations, Violation{Layer: layer, Tensor: tensor, Rule: rule, Msg: fmt.Sprintf(format, a...)})
}

// violateRule records a break of a loader rule: what is wrong, what the
// loader does with it and how to fix it, under the rule's id.
func (r *Report) violateRule(layer int, lr *LoaderRule, format string, a ...any) {
	if r.quiet {
		r.failed++
		return
	}
	r.Violations = append(r.Violations, Violation{Layer: layer, Rule: lr.ID,
		Msg: fmt.Sprintf(format, a...) + ": " + lr.Does + "; " + lr.Fix})
}

// warnRule is violateRule for a rule whose break depends on what the
// report cannot see (which configuration module is beside the weights).
func (r *Report) warnRule(layer int, lr *LoaderRule, format string, a ...any) {
	if r.quiet {
		return
	}
	r.Warnings = append(r.Warnings, Violation{Layer: layer, Rule: lr.ID,
		Msg: fmt.Sprintf(format, a...) + ": " + lr.Does + "; " + lr.Fix})
}

func (r *Report) warn(layer int, tensor, rule, format string, a ...any) {
	if r.quiet {
		return
	}
	r.Warnings = append(r.Warnings, Violation{Layer: layer, Tensor: tensor, Rule: rule, Msg: fmt.Sprintf(format, a...)})
}

// ValidationError is returned when a checkpoint breaks an engine's rules.
type ValidationError struct{ Report *Report }

func (e *ValidationError) Error() string {
	r := e.Report
	var b strings.Builder
	where := r.Dir
	if where == "" {
		where = "checkpoint"
	}
	engine := r.Engine
	if engine == "" {
		engine = "any engine"
	}
	fmt.Fprintf(&b, "%s breaks %d rule(s) of %s:", where, len(r.Violations), engine)
	for _, v := range r.Violations {
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// Options are serving settings that add rules.
type Options struct {
	// TP is the tensor-parallel size (0 or 1: none). With TP > 1, query
	// heads, MLP widths and Mamba heads must divide by TP, and KV heads must
	// divide by TP or evenly replicate across it (TP % kv == 0), for the
	// engines that shard that way (vLLM, SGLang, TensorRT-LLM).
	TP int
}

// ValidateDir validates the checkpoint directory dir (config.json plus
// safetensors weights) for engine ("" checks only what every engine needs:
// the tensors present and shaped like the config). The error is for what
// stops validation itself (unknown engine, unreadable directory); rule
// violations are in the report.
func ValidateDir(dir, engine string) (*Report, error) {
	return ValidateDirWith(dir, engine, Options{})
}

// ValidateDirWith is ValidateDir with serving options.
func ValidateDirWith(dir, engine string, opt Options) (*Report, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	caps, err := capsFor(engine)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	r, m := validateConfig(data, caps)
	r.Dir = dir
	if caps.RemoteCode && m != nil && m.Family().PerLayer {
		checkRemoteCode(r, dir, m, caps)
	}
	if m == nil {
		return r, nil
	}
	if caps.DeciLMTokenizer != nil && m.Family().PerLayer {
		checkTokenizer(r, dir, m, caps.DeciLMTokenizer)
	}
	checkTP(r, m, caps, opt.TP)
	ck, err := checkpoint.Open(dir)
	if err != nil {
		r.violate(-1, "", "weights", "cannot read the weights: %v", err)
		return r, nil
	}
	defer ck.Close()
	checkTensors(r, m, ck.Tensors())
	return r, nil
}

// ValidateConfig validates a config.json alone for engine.
func ValidateConfig(data []byte, engine string) (*Report, error) {
	return ValidateConfigWith(data, engine, Options{})
}

// ValidateConfigWith is ValidateConfig with serving options: every rule
// that config.json alone decides (all but the tensors and remote-code
// files), so a writer can check a child before writing its weights.
func ValidateConfigWith(data []byte, engine string, opt Options) (*Report, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	caps, err := capsFor(engine)
	if err != nil {
		return nil, err
	}
	r, m := validateConfig(data, caps)
	if m != nil {
		checkTP(r, m, caps, opt.TP)
	}
	return r, nil
}

// ValidateModel validates a model description (without weights) for engine.
func ValidateModel(m *architecture.Model, engine string) (*Report, error) {
	caps, err := capsFor(engine)
	if err != nil {
		return nil, err
	}
	r := &Report{Engine: engine, Arch: m.Arch, Layers: len(m.Layers)}
	checkModel(r, m, caps, m.Raw)
	return r, nil
}

// CheckDir is ValidateDir returning an error when the checkpoint breaks a
// rule; it has the signature prune.Options.Validate expects.
func CheckDir(dir, engine string) error {
	r, err := ValidateDir(dir, engine)
	if err != nil {
		return err
	}
	return r.Err()
}

func capsFor(engine string) (Capabilities, error) {
	if engine == "" {
		return Capabilities{Native: nativeAll, DeciLM: true, FFNIntermediateSize: true,
			LinearAttention: true, LinearFFN: true, DeciLMBias: true, ShardsTP: true}, nil
	}
	return Lookup(engine)
}

func validateConfig(data []byte, caps Capabilities) (*Report, *architecture.Model) {
	r := &Report{Engine: caps.Name}
	m, err := architecture.FromConfig(data)
	var raw map[string]any
	if m != nil {
		raw = m.Raw
	}
	if raw == nil {
		// Decode what we can for block-level rules (FromConfig refuses
		// replace_with_linear blocks, which some engines load).
		_ = json.Unmarshal(data, &raw)
	}
	if raw != nil {
		if a, ok := raw["architectures"].([]any); ok && len(a) > 0 {
			r.Arch, _ = a[0].(string)
		}
	}
	if r.Arch == "" && raw != nil && !caps.ByModelType {
		fix := "add \"architectures\": [\"<class>\"]"
		if m != nil && m.Arch != "" {
			fix = fmt.Sprintf("add \"architectures\": [%q]", m.Arch)
		}
		r.violate(-1, "", "architectures", "config.json has no \"architectures\"; %s picks the model class from architectures[0]: %s", caps.Name, fix)
	}
	if perLayerConfig(r.Arch, raw) {
		checkDeciLMRaw(r, raw, caps)
		if lr := caps.DeciLMFloatFFNMult; lr != nil {
			checkFloatFFNMult(r, data, lr)
		}
	}
	if err != nil {
		var ua *architecture.UnsupportedArchError
		if errors.As(err, &ua) && strings.Contains(err.Error(), "replace_with_linear") {
			if len(r.Violations) == 0 {
				r.warn(-1, "", "decilm-linear", "replace_with_linear blocks load in %s but autocompress cannot check their shapes", caps.Name)
			}
			return r, nil
		}
		r.violate(-1, "", "config", "config.json: %v", err)
		return r, nil
	}
	r.Layers = len(m.Layers)
	checkModel(r, m, caps, raw)
	return r, m
}

// perLayerConfig reports whether a config names a family whose native
// config is DeciLM block_configs, by class or by model_type (read raw, as
// FromConfig may have refused the config).
func perLayerConfig(arch string, raw map[string]any) bool {
	if f, ok := architecture.Lookup(arch); ok && f.PerLayer {
		return true
	}
	mt, _ := raw["model_type"].(string)
	f, ok := architecture.LookupModelType(mt)
	return ok && f.PerLayer
}

// checkModel applies the rules that need the parsed model.
func checkModel(r *Report, m *architecture.Model, caps Capabilities, raw map[string]any) {
	deci := m.Family().PerLayer
	if !deci && !m.Uniform() {
		// An in-memory per-layer shape: it is written as DeciLM when it can
		// be, and the native format cannot hold it otherwise.
		deci = architecture.FormatFor(m) == architecture.DeciLMFormat
		if _, err := m.Config(architecture.ConfigOptions{}); err != nil {
			r.violate(-1, "", "format", "no checkpoint format holds this shape: %v", err)
		}
	}
	if caps.Runs != nil && slices.ContainsFunc(m.Layers, func(l architecture.Layer) bool { return l.Mamba != nil || l.MoE != nil }) {
		if err := caps.Runs(m); err != nil {
			layer := -1
			var u *engine.UnsupportedError
			if errors.As(err, &u) {
				layer = u.Layer
			}
			r.violate(layer, "", "layers", "%s does not run this model: %v", caps.Name, err)
		}
	}
	if deci && !caps.DeciLM {
		r.violate(-1, "", "architecture", "%s does not load DeciLM block_configs; export a uniform child in the native format", caps.Name)
	}
	if !deci && caps.Name != "" && !caps.native(m.Arch) {
		r.violate(-1, "", "architecture", "%s does not serve %s", caps.Name, m.Arch)
	}
	var firstHeads, firstHeadDim = -1, -1
	var kvs []int
	for i, l := range m.Layers {
		if a := l.Attention; a != nil {
			if a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
				r.violate(i, "", "gqa", "%d query heads are not a whole multiple of %d KV heads", a.Heads, a.KVHeads)
			}
			if deci {
				if a.QKNorm {
					r.violate(i, "", "decilm-qk-norm", "DeciLM blocks have no qk-norm; a Qwen3-style model cannot be exported as DeciLM (use the native or padded format)")
				}
				if firstHeads < 0 {
					firstHeads, firstHeadDim = a.Heads, a.HeadDim
				} else if a.Heads != firstHeads || a.HeadDim != firstHeadDim {
					r.violate(i, "", "decilm-global-heads", "DeciLM query heads and head_dim are global: layer has %d×%d, first attention layer %d×%d", a.Heads, a.HeadDim, firstHeads, firstHeadDim)
				}
				kvs = append(kvs, a.KVHeads)
				if caps.DeciLMHeadDimRule && a.HeadDim*a.Heads != m.Hidden && i == firstAttention(m) {
					r.violate(-1, "", "head-dim", "%s derives head_dim as hidden_size/num_attention_heads = %d/%d = %d for DeciLM, but the model has head_dim %d; keep hidden = heads × head_dim (do not prune hidden channels while keeping the head count) or export in the native format",
						caps.Name, m.Hidden, a.Heads, m.Hidden/max(a.Heads, 1), a.HeadDim)
				}
				if (a.QKVBias || a.OutBias) && !caps.DeciLMBias {
					r.violate(i, "", "decilm-bias", "%s builds DeciLM attention with bias=False, but attention_bias is true", caps.Name)
				}
			}
		}
		if x := l.Mamba; x != nil && (x.Groups <= 0 || x.Heads%x.Groups != 0) {
			r.violate(i, "", "mamba-groups", "mamba_num_heads %d not divisible by n_groups %d", x.Heads, x.Groups)
		}
		if x := l.MLP; x != nil && deci && x.Width%DeciLMFFNMultiple != 0 {
			if caps.FFNIntermediateSize {
				r.warn(i, "", "ffn-alignment", "FFN width %d is not a multiple of %d; engines reading ffn_mult would round it up", x.Width, DeciLMFFNMultiple)
			} else {
				r.violate(i, "", "decilm-ffn-multiple", "FFN width %d is not a multiple of %d: %s rounds ffn_mult up to the next multiple (%d) and the weights will not load",
					x.Width, DeciLMFFNMultiple, caps.Name, (x.Width+255)/256*256)
			}
		}
	}
	checkMoE(r, m, caps, raw)
	if w := caps.EvenLayerWindows; w != nil && m.Arch == w.Arch {
		lr := w.Rule
		for i, l := range m.Layers {
			if a := l.Attention; a != nil && (a.SlidingWindow != 0) != (i%2 == 0) {
				kind := "full attention at an even index: the engine windows it"
				if a.SlidingWindow != 0 {
					kind = "a sliding window at an odd index: the engine gives it full attention"
				}
				r.violateRule(i, lr, "%s", kind)
			}
		}
	}
	if deci {
		checkLoaderRules(r, m, caps)
	}
	if deci && caps.KVPageRatios && len(kvs) > 1 {
		mx := 0
		for _, k := range kvs {
			mx = max(mx, k)
		}
		for i, l := range m.Layers {
			if a := l.Attention; a != nil && a.KVHeads > 0 && mx%a.KVHeads != 0 {
				r.warn(i, "", "kv-page-ratio", "%d KV heads do not divide the largest layer's %d; older vLLM V1 builds need KV cache pages that divide each other (prefer power-of-two ratios)", a.KVHeads, mx)
			}
		}
	}
}

// checkLoaderRules applies the engine loader's rules on DeciLM block
// shapes (Capabilities.DeciLMUniformKV, DeciLMFirstAttention,
// DeciLMAttentionNeedsFFN).
func checkLoaderRules(r *Report, m *architecture.Model, caps Capabilities) {
	if lr := caps.DeciLMUniformKV; lr != nil {
		first := firstAttention(m)
		for i, l := range m.Layers {
			if a := l.Attention; a != nil && i > first && a.KVHeads != m.Layers[first].Attention.KVHeads {
				r.violateRule(i, lr, "%d KV heads, but layer %d has %d", a.KVHeads, first, m.Layers[first].Attention.KVHeads)
			}
		}
	}
	if lr := caps.DeciLMFirstAttention; lr != nil {
		// Blocks with neither attention nor MLP pass the residual on unset.
		for i, l := range m.Layers {
			if l.Attention == nil && l.MLP == nil {
				continue
			}
			if l.Attention == nil {
				r.violateRule(i, lr, "the first block has its attention removed (attention.no_op) and keeps its MLP")
			}
			break
		}
	}
	if lr := caps.DeciLMAttentionNeedsFFN; lr != nil {
		for i, l := range m.Layers {
			if l.Attention != nil && l.MLP == nil {
				r.violateRule(i, lr, "the MLP is removed (ffn.no_op) but the attention is kept")
			}
		}
	}
}

// checkTokenizer applies a converter's rule on a DeciLM child's tokenizer
// (Capabilities.DeciLMTokenizer), reading dir/tokenizer.json.
func checkTokenizer(r *Report, dir string, m *architecture.Model, tr *TokenizerRule) {
	vocab := tr.KeptVocab // the converter's default when vocab_size is absent
	if v, ok := m.Raw["vocab_size"]; ok && v != nil {
		vocab = intOf(v)
	}
	if vocab == tr.KeptVocab {
		return
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		r.violateRule(-1, &tr.LoaderRule, "vocab_size is %d (not %d) and tokenizer.json cannot be read (%v)", vocab, tr.KeptVocab, errors.Unwrap(err))
		return
	}
	var tok struct {
		Model struct {
			Type         string `json:"type"`
			ByteFallback bool   `json:"byte_fallback"`
		} `json:"model"`
		Decoder *struct {
			Type string `json:"type"`
		} `json:"decoder"`
	}
	if err := json.Unmarshal(data, &tok); err != nil {
		r.violateRule(-1, &tr.LoaderRule, "vocab_size is %d (not %d) and tokenizer.json is not valid JSON (%v)", vocab, tr.KeptVocab, err)
		return
	}
	decoder := "none"
	if tok.Decoder != nil {
		decoder = tok.Decoder.Type
	}
	if tok.Model.Type != tr.ModelType || tok.Model.ByteFallback != tr.ByteFallback || decoder != tr.Decoder {
		r.violateRule(-1, &tr.LoaderRule, "vocab_size is %d (not %d) and tokenizer.json is model type %s with byte_fallback %v and decoder %s (the converter needs %s, byte_fallback %v, decoder %s)",
			vocab, tr.KeptVocab, tok.Model.Type, tok.Model.ByteFallback, decoder, tr.ModelType, tr.ByteFallback, tr.Decoder)
	}
}

// checkFloatFFNMult applies Capabilities.DeciLMFloatFFNMult: the first
// block's ffn_mult, read as written, must be a JSON number with a point or
// an exponent (Python reads any other as an int) or null.
func checkFloatFFNMult(r *Report, data []byte, lr *LoaderRule) {
	var cfg struct {
		Blocks []struct {
			FFN struct {
				Mult json.RawMessage `json:"ffn_mult"`
			} `json:"ffn"`
		} `json:"block_configs"`
	}
	if json.Unmarshal(data, &cfg) != nil || len(cfg.Blocks) == 0 {
		return // reported by the other rules
	}
	m := strings.TrimSpace(string(cfg.Blocks[0].FFN.Mult))
	if _, err := strconv.Atoi(m); err == nil {
		r.violateRule(0, lr, "ffn_mult is written %s, an integer to Python", m)
	}
}

// roundTrips reports whether an FFN width w survives ffn_mult at hidden
// size h (a multiple of 256; DeciLMFFNWidth(FFNMult(w, h), h) == w).
func roundTrips(w, h int) bool {
	return w > 0 && h > 0 && w%DeciLMFFNMultiple == 0 && DeciLMFFNWidth(FFNMult(w, h), h) == w
}

// ffnMultReader says how an engine without FFNIntermediateSize reads an
// FFN's width.
func ffnMultReader(caps Capabilities) string {
	if caps.FFNMultReader != "" {
		return caps.FFNMultReader
	}
	return caps.Name + " reads only ffn.ffn_mult"
}

// checkTP applies the tensor-parallel divisibility rules.
func checkTP(r *Report, m *architecture.Model, caps Capabilities, tp int) {
	if tp <= 1 {
		return
	}
	if !caps.ShardsTP {
		r.warn(-1, "", "tp", "%s does not shard layers by tensor parallelism; TP %d not checked", caps.Name, tp)
		return
	}
	for _, v := range m.TPViolations(tp) {
		r.violate(v.Layer, "", v.Rule, "%s", v.Msg)
	}
}

func firstAttention(m *architecture.Model) int {
	for i, l := range m.Layers {
		if l.Attention != nil {
			return i
		}
	}
	return -1
}

// checkDeciLMRaw applies the block_configs rules that need the raw JSON:
// ffn_mult versus intermediate_size, the ffn_mult round trip, n_heads_in_group
// divisibility and replace_with_linear.
func checkDeciLMRaw(r *Report, raw map[string]any, caps Capabilities) {
	blocks, _ := raw["block_configs"].([]any)
	hidden := intOf(raw["hidden_size"])
	heads := intOf(raw["num_attention_heads"])
	if caps.Name != "" && caps.RemoteCode {
		if _, ok := raw["auto_map"]; !ok {
			r.violate(-1, "", "remote-code", "%s builds a DeciLM config through transformers' AutoConfig, which loads model_type nemotron-nas only through remote code, but config.json has no auto_map (add auto_map for configuration_decilm.DeciLMConfig / modeling_decilm.DeciLMForCausalLM and ship those files)", caps.Name)
		}
	}
	for i, b := range blocks {
		blk, _ := b.(map[string]any)
		att, _ := blk["attention"].(map[string]any)
		ffn, _ := blk["ffn"].(map[string]any)
		if att != nil {
			if truthy(att["replace_with_linear"]) && !caps.LinearAttention {
				r.violate(i, "", "decilm-linear", "attention.replace_with_linear is not loaded by %s (only TensorRT-LLM and llama.cpp load linear attention); use no_op or keep the attention", caps.Name)
			}
			if g, ok := att["n_heads_in_group"]; ok && g != nil && !truthy(att["no_op"]) {
				n := intOf(g)
				if n <= 0 || heads > 0 && heads%n != 0 {
					r.violate(i, "", "decilm-n-heads-in-group", "n_heads_in_group %v must divide num_attention_heads %d", g, heads)
				}
			}
		}
		if ffn != nil {
			if truthy(ffn["replace_with_linear"]) && !caps.LinearFFN {
				r.violate(i, "", "decilm-linear", "ffn.replace_with_linear is not loaded by %s; use no_op or keep the FFN", caps.Name)
			}
			if truthy(ffn["no_op"]) || truthy(ffn["replace_with_linear"]) {
				continue
			}
			is, hasIS := ffn["intermediate_size"]
			mult, hasMult := ffn["ffn_mult"]
			hasIS = hasIS && is != nil
			hasMult = hasMult && mult != nil
			switch {
			case !hasMult && hasIS && caps.FFNMultFirst != nil:
				r.warnRule(i, caps.FFNMultFirst, "this block gives ffn.intermediate_size %v but no ffn_mult", is)
			case !hasMult && hasIS && !caps.FFNIntermediateSize && caps.FFNMultAttribute && roundTrips(intOf(is), hidden):
				r.warn(i, "", "decilm-ffn-mult-only", "this block gives ffn.intermediate_size %v but no ffn_mult: %s; the configuration module prune writes derives ffn_mult = %s from it, another one (NVIDIA's) may not: write ffn_mult too",
					is, ffnMultReader(caps), strconv.FormatFloat(FFNMult(intOf(is), max(hidden, 1)), 'g', -1, 64))
			case !hasMult && hasIS && !caps.FFNIntermediateSize:
				r.violate(i, "", "decilm-ffn-mult-only", "this block gives ffn.intermediate_size %v but no ffn_mult: %s; write ffn_mult = %s", is, ffnMultReader(caps), strconv.FormatFloat(FFNMult(intOf(is), max(hidden, 1)), 'g', -1, 64))
			case hasMult && hidden > 0:
				f, ok := numOf(mult)
				if !ok {
					r.violate(i, "", "decilm-ffn-mult", "ffn_mult %v is not a number", mult)
					continue
				}
				w := DeciLMFFNWidth(f, hidden)
				if hasIS && intOf(is) != w {
					// Engines that read intermediate_size and those that read
					// ffn_mult would build different widths; the weights
					// have intermediate_size's.
					r.violate(i, "", "decilm-ffn-round-trip", "ffn_mult %v gives width %d under round_up(int(2·ffn_mult·hidden/3), 256) but intermediate_size is %v", f, w, is)
				}
				if exact := 2 * f * float64(hidden) / 3; math.Abs(exact-float64(w)) >= 1 {
					r.warn(i, "", "decilm-ffn-round-trip", "ffn_mult %v gives %.3f before rounding up to %d; write ffn_mult = 3·width/(2·hidden) of a multiple-of-256 width so that every engine builds the same width", f, exact, w)
				}
			case !hasMult && !hasIS:
				r.violate(i, "", "decilm-ffn-mult", "block has neither ffn_mult nor intermediate_size")
			}
		}
	}
}

// checkRemoteCode verifies that the Python files config.json's auto_map
// needs are present: each "module.Class" module (a "repo--module.Class"
// reference is fetched from that Hub repository instead) and, recursively,
// every module it imports relatively, as transformers copies them
// (dynamic_module_utils.get_relative_import_files over
// get_relative_imports: lines "import .x" and "from .x import ...", each
// x.py beside the importing file). transformers has no DeciLM class of its
// own (model_type nemotron-nas is not in CONFIG_MAPPING_NAMES,
// models/auto/configuration_auto.py), so AutoConfig.from_pretrained loads
// it only through auto_map.AutoConfig, and get_class_from_dynamic_module
// reads module.py from the checkpoint directory. An engine that picks the
// model class through transformers' Auto classes (ByModelType: hf) needs
// auto_map.AutoModelForCausalLM besides; the serving engines use their own
// DeciLM classes and need only the configuration.
func checkRemoteCode(r *Report, dir string, m *architecture.Model, caps Capabilities) {
	am, _ := m.Raw["auto_map"].(map[string]any)
	if am == nil {
		return // reported by checkDeciLMRaw
	}
	if _, ok := am["AutoModelForCausalLM"]; !ok && caps.ByModelType {
		r.violate(-1, "", "remote-code", "transformers builds DeciLMForCausalLM only through auto_map.AutoModelForCausalLM, and config.json has none: "+
			"autocompress writes only the configuration module (configuration_decilm.py), which the serving engines need; add a modeling_decilm.py "+
			"(e.g. from nvidia/Llama-3_1-Nemotron-51B-Instruct, after checking its licence) when pruning, and prune names it in auto_map")
	}
	keys := make([]string, 0, len(am))
	for k := range am {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[string]bool{}
	for _, k := range keys {
		v, _ := am[k].(string)
		if v == "" || strings.Contains(v, "--") { // "repo--module.Class" refers to a hub repository
			continue
		}
		file := v[:max(strings.LastIndex(v, "."), 0)] + ".py"
		if seen[file] {
			continue
		}
		seen[file] = true
		if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
			r.violate(-1, "", "remote-code", "auto_map.%s needs %s beside the weights (transformers loads DeciLM through remote code); copy it from the parent's model repository (e.g. nvidia/Llama-3_1-Nemotron-51B-Instruct) after checking its licence", k, file)
			continue
		}
		missing, err := RemoteCodeImports(dir, file)
		if err != nil {
			r.violate(-1, "", "remote-code", "auto_map.%s: %v", k, err)
			continue
		}
		for _, mi := range missing {
			if seen[mi.File] {
				continue
			}
			seen[mi.File] = true
			if !mi.Present {
				r.violate(-1, "", "remote-code", "%s (named by auto_map.%s) imports %s relatively, which is not beside the weights; transformers copies and imports it with the module, so add it too", mi.By, k, mi.File)
			}
		}
	}
}

// RemoteImport is one file a remote-code module needs through relative
// imports: File (e.g. "block_config.py"), the module file By that imports
// it, and whether it is Present in the directory.
type RemoteImport struct {
	File, By string
	Present  bool
}

// relativeImport matches transformers' get_relative_imports
// (dynamic_module_utils.py): `import .x` alone on a line, or `from .x import`.
var relativeImport = regexp.MustCompile(`(?m)^\s*import\s+\.(\S+)\s*$|^\s*from\s+\.(\S+)\s+import`)

// RemoteCodeImports follows the relative imports of the module file (in
// dir) recursively, as transformers' get_relative_import_files does, and
// returns every file they name, in the order found, each once: a module x
// is x.py beside the importing file ("from .a.b import" names a/b.py). A
// file that is absent is listed with Present false and not followed.
func RemoteCodeImports(dir, file string) ([]RemoteImport, error) {
	var out []RemoteImport
	seen := map[string]bool{file: true}
	queue := []string{file}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("reading remote-code module %s: %w", f, err)
		}
		for _, m := range relativeImport.FindAllStringSubmatch(string(b), -1) {
			mod := m[1] + m[2]
			name := strings.ReplaceAll(mod, ".", "/") + ".py"
			if seen[name] {
				continue
			}
			seen[name] = true
			_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
			out = append(out, RemoteImport{File: name, By: f, Present: err == nil})
			if err == nil {
				queue = append(queue, name)
			}
		}
	}
	return out, nil
}

var layerOf = regexp.MustCompile(`\.layers\.(\d+)\.`)

// checkTensors compares the stored tensors with the ones the config implies.
func checkTensors(r *Report, m *architecture.Model, got []checkpoint.TensorInfo) {
	want := m.Tensors()
	have := make(map[string]checkpoint.TensorInfo, len(got))
	for _, t := range got {
		have[t.Name] = t
	}
	layer := func(name string) int {
		if s := layerOf.FindStringSubmatch(name); s != nil {
			n, _ := strconv.Atoi(s[1])
			return n
		}
		return -1
	}
	tiedHead := ""
	if m.TiedEmbeddings {
		tiedHead = m.LMHead().Name // not in want, but may be stored
	}
	wantSet := make(map[string]bool, len(want))
	for _, w := range want {
		wantSet[w.Name] = true
		t, ok := have[w.Name]
		if !ok {
			r.violate(layer(w.Name), w.Name, "tensor-missing", "missing: the config implies shape %v", w.Shape)
			continue
		}
		if !slices.Equal(t.Shape, w.Shape) {
			r.violate(layer(w.Name), w.Name, "tensor-shape", "shape %v in %s at byte offset %d, but the config implies %v", t.Shape, filepath.Base(t.File), t.Offset, w.Shape)
		}
	}
	for _, t := range got {
		if wantSet[t.Name] {
			continue
		}
		switch {
		case t.Name == tiedHead:
			r.warn(-1, t.Name, "tied-duplicate", "tie_word_embeddings is true but %s is stored as well (engines ignore it; it wastes space)", t.Name)
		case strings.HasSuffix(t.Name, "rotary_emb.inv_freq"):
		case strings.HasSuffix(t.Name, "q_norm.weight") || strings.HasSuffix(t.Name, "k_norm.weight"):
			r.violate(layer(t.Name), t.Name, "decilm-qk-norm", "qk-norm weight present, but %s has no qk-norm; the engine would ignore it and compute a different function", m.Arch)
		default:
			r.violate(layer(t.Name), t.Name, "tensor-unexpected", "not part of %s as configured (shape %v)", m.Arch, t.Shape)
		}
	}
	if dt := m.DType; dt != "" {
		counts := map[string]int{}
		for _, t := range got {
			if n := t.DType.TorchName(); n != "" && t.DType.IsFloat() && len(t.Shape) >= 2 {
				counts[n]++
			}
		}
		for n := range counts {
			if n != dt && "torch."+dt != n && strings.TrimPrefix(n, "torch.") != dt {
				r.warn(-1, "", "dtype", "config torch_dtype is %s but %d matrices are %s", dt, counts[n], n)
			}
		}
	}
}

func truthy(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// numOf converts a decoded JSON number of any representation.
func numOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func intOf(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case int64:
		return int(x)
	case json.Number:
		n, _ := x.Int64()
		return int(n)
	}
	return 0
}

// ValidateEngines validates dir for each engine in turn (ValidateDirWith)
// and returns a report per engine, in order, and how many of them break a
// rule. It stops with ctx's error when ctx is cancelled between engines.
func ValidateEngines(ctx context.Context, dir string, engines []string, opt Options) (reports []*Report, failed int, err error) {
	for _, e := range engines {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		r, err := ValidateDirWith(dir, e, opt)
		if err != nil {
			return nil, 0, err
		}
		reports = append(reports, r)
		if !r.OK() {
			failed++
		}
	}
	return reports, failed, nil
}

package prune

// Re-statements, in Go, of how four serving engines read a child's
// config.json and weights, written from their loader source (versions of
// mid-2026, the commit read in brackets) so that TestLoaderConformance can
// compare what each loader would do with what export's validators say.
// Each step names the function it restates. They are fixtures, not the
// validators: they read the raw JSON as the loader does (keys, None, int
// versus float) and never call package export or architecture for a
// DeciLM child.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// child is a child directory as the loaders see it: config.json decoded
// with numbers kept as written (Python's json tells 4 from 4.0), the files
// beside it and the stored tensors' shapes. A config-only child (from a
// published config, no weights) has tensors nil: weights are not checked
// and the files are assumed present.
type child struct {
	cfg     map[string]any
	dir     string
	files   map[string]bool
	tensors map[string][]int64
}

func readChild(dir string) (*child, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	c, err := childOfConfig(b)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	c.dir = dir
	c.files = map[string]bool{}
	for _, e := range ents {
		c.files[e.Name()] = true
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	c.tensors = map[string][]int64{}
	for _, ti := range ck.Tensors() {
		c.tensors[ti.Name] = ti.Shape
	}
	return c, nil
}

func childOfConfig(b []byte) (*child, error) {
	d := json.NewDecoder(strings.NewReader(string(fixNonFinite(b))))
	d.UseNumber()
	c := &child{}
	if err := d.Decode(&c.cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// outcome is what a loader does with a child: the rule id of export's
// report that names the same failure ("" when it loads and computes the
// intended model), and what the loader does, in words.
type outcome struct {
	rule, what string
}

func (o outcome) ok() bool { return o.rule == "" }

func fail(rule, format string, a ...any) outcome {
	return outcome{rule: rule, what: fmt.Sprintf(format, a...)}
}

// Python-style reads of the decoded JSON.
func (c *child) has(file string) bool { return c.files == nil || c.files[file] }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func intNum(v any) (int, bool) {
	f, ok := num(v)
	return int(f), ok && f == math.Trunc(f)
}

// pyFloat reports whether Python's json would decode v as a float (a
// number written with a point or an exponent).
func pyFloat(v any) bool {
	n, ok := v.(json.Number)
	return ok && strings.ContainsAny(string(n), ".eE")
}

func truthy(v any) bool { b, _ := v.(bool); return b }

// autoConfig restates transformers' AutoConfig.from_pretrained with
// trust_remote_code=True (models/auto/configuration_auto.py, 00100232;
// dynamic_module_utils.get_class_from_dynamic_module), as vLLM's
// HFConfigParser.parse, TensorRT-LLM's ModelConfig.from_pretrained and
// SGLang's get_config call it: with auto_map the "module.Class" reference
// is imported from module.py in the directory; without it, model_type
// must be one transformers knows (nemotron-nas is not).
func autoConfig(c *child) outcome {
	if am := obj(c.cfg["auto_map"]); am != nil {
		ref, _ := am["AutoConfig"].(string)
		if i := strings.LastIndex(ref, "."); i > 0 && !strings.Contains(ref, "--") {
			return c.module(ref[:i]+".py", map[string]bool{})
		}
	}
	mt, _ := c.cfg["model_type"].(string)
	if !slices.Contains([]string{"llama", "qwen3", "nemotron_h", "mistral", "qwen2"}, mt) {
		return fail("remote-code", "AutoConfig: model type %q is not in CONFIG_MAPPING (ValueError: Transformers does not recognize this architecture)", mt)
	}
	return outcome{}
}

// relativeImport matches the lines transformers' get_relative_imports
// reads (dynamic_module_utils.py): "import .x" and "from .x import ...".
var relativeImport = regexp.MustCompile(`(?m)^\s*(?:import|from)\s+\.(\w+)`)

// module restates get_cached_module_file and get_relative_import_files:
// the module must be in the directory, and so, recursively, every module
// it imports relatively.
func (c *child) module(name string, seen map[string]bool) outcome {
	if seen[name] {
		return outcome{}
	}
	seen[name] = true
	if !c.has(name) {
		return fail("remote-code", "AutoConfig: %s is not in the directory (OSError from get_cached_module_file)", name)
	}
	if c.dir == "" {
		return outcome{}
	}
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil {
		return fail("remote-code", "AutoConfig: %v", err)
	}
	for _, m := range relativeImport.FindAllStringSubmatch(string(b), -1) {
		if o := c.module(m[1]+".py", seen); !o.ok() {
			return o
		}
	}
	return outcome{}
}

// block is one block_configs entry as the configuration module builds it
// (NVIDIA's configuration_decilm.py runs BlockConfig(**conf), whose
// dataclass fields default to None or False, so every attribute exists).
type block struct{ att, ffn map[string]any }

func blocks(c *child) []block {
	var out []block
	for _, b := range c.cfg["block_configs"].([]any) {
		bo := obj(b)
		out = append(out, block{obj(bo["attention"]), obj(bo["ffn"])})
	}
	return out
}

// findMultiple and ffnMultWidth restate _ffn_mult_to_intermediate_size
// (the same in all four engines): int(2·ffn_mult·n_embd/3) rounded up to
// a multiple of 256.
func ffnMultWidth(mult float64, hidden int) int {
	n := int(2 * mult * float64(hidden) / 3)
	if n%256 == 0 {
		return n
	}
	return n + 256 - n%256
}

// want is the set of parameters a loader builds, name → shape.
type want map[string][]int64

func (w want) attention(i, hidden, heads, kv, hd int) {
	p := fmt.Sprintf("model.layers.%d.", i)
	w[p+"input_layernorm.weight"] = []int64{int64(hidden)}
	w[p+"self_attn.q_proj.weight"] = []int64{int64(heads * hd), int64(hidden)}
	w[p+"self_attn.k_proj.weight"] = []int64{int64(kv * hd), int64(hidden)}
	w[p+"self_attn.v_proj.weight"] = []int64{int64(kv * hd), int64(hidden)}
	w[p+"self_attn.o_proj.weight"] = []int64{int64(hidden), int64(heads * hd)}
}

func (w want) mlp(i, hidden, width int) {
	p := fmt.Sprintf("model.layers.%d.", i)
	w[p+"post_attention_layernorm.weight"] = []int64{int64(hidden)}
	w[p+"mlp.gate_proj.weight"] = []int64{int64(width), int64(hidden)}
	w[p+"mlp.up_proj.weight"] = []int64{int64(width), int64(hidden)}
	w[p+"mlp.down_proj.weight"] = []int64{int64(hidden), int64(width)}
}

// weights restates the weight loading every engine does (load_weights
// into the parameters it built: a stored tensor with no parameter, a
// parameter left unloaded or a shape that differs fails); a tied LM head
// is skipped.
func weights(c *child, w want) outcome {
	if c.tensors == nil {
		return outcome{}
	}
	vocab, _ := intNum(c.cfg["vocab_size"])
	hidden, _ := intNum(c.cfg["hidden_size"])
	w["model.embed_tokens.weight"] = []int64{int64(vocab), int64(hidden)}
	w["model.norm.weight"] = []int64{int64(hidden)}
	tied := truthy(c.cfg["tie_word_embeddings"])
	if !tied {
		w["lm_head.weight"] = []int64{int64(vocab), int64(hidden)}
	}
	for name, shape := range c.tensors {
		if tied && name == "lm_head.weight" || strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue
		}
		ws, ok := w[name]
		if !ok {
			return fail("tensor-unexpected", "load_weights: %s has no parameter (KeyError)", name)
		}
		if !slices.Equal(ws, shape) {
			return fail("tensor-shape", "load_weights: %s is %v, the parameter %v", name, shape, ws)
		}
	}
	for name := range w {
		if _, ok := c.tensors[name]; !ok {
			return fail("tensor-missing", "load_weights: %s not in the checkpoint", name)
		}
	}
	return outcome{}
}

// nativeLoad is what the four engines do with a native class
// (LlamaForCausalLM, Qwen3ForCausalLM, NemotronHForCausalLM): the class
// registered for architectures[0] builds its layers from the standard
// config fields (this re-statement takes the parameter list from package
// architecture, which reads those fields the same way), and the weights
// must fill them. Zero-padded children are native children of the
// parent's shapes, whose zero rows and columns add exactly 0: the
// intended model.
func nativeLoad(c *child, registered []string) outcome {
	arch := ""
	if a, ok := c.cfg["architectures"].([]any); ok && len(a) > 0 {
		arch, _ = a[0].(string)
	}
	if !slices.Contains(registered, arch) {
		return fail("architecture", "%s is not registered", arch)
	}
	b, _ := json.Marshal(c.cfg)
	m, err := architecture.FromConfig(b)
	if err != nil {
		return fail("config", "%v", err)
	}
	if c.tensors == nil {
		return outcome{}
	}
	for name, shape := range c.tensors {
		if m.TiedEmbeddings && name == m.LMHead().Name {
			continue
		}
		found := false
		for _, ts := range m.Tensors() {
			if ts.Name == name {
				found = true
				if !slices.Equal(ts.Shape, shape) {
					return fail("tensor-shape", "%s is %v, the parameter %v", name, shape, ts.Shape)
				}
			}
		}
		if !found {
			return fail("tensor-unexpected", "%s has no parameter", name)
		}
	}
	return outcome{}
}

var registeredNative = []string{architecture.Llama, architecture.Qwen3, architecture.NemotronH}

// poolDeciLM restates the part vLLM's and SGLang's DeciLM classes share
// (DeciLMDecoderLayer.__init__ and forward; vllm nemotron_nas.py
// 00bd1493, sglang nemotron_nas.py 15a024d4). intermediateIfNoMult: vLLM
// reads ffn.intermediate_size where hasattr(ffn, "ffn_mult") is false,
// which with the configuration module prune writes is where the block has
// no ffn_mult; SGLang reads ffn.ffn_mult only (taken here as the JSON key).
// The forward pass sets the residual only in an attention block and hands
// it to post_attention_layernorm.
func poolDeciLM(c *child, intermediateIfNoMult bool, headDim func(hidden, heads int) int) outcome {
	if o := autoConfig(c); !o.ok() {
		return o
	}
	hidden, _ := intNum(c.cfg["hidden_size"])
	heads, _ := intNum(c.cfg["num_attention_heads"])
	hd := headDim(hidden, heads)
	w := want{}
	residual := false
	for i, b := range blocks(c) {
		if !truthy(b.att["no_op"]) {
			g, ok := intNum(b.att["n_heads_in_group"])
			if !ok || g <= 0 {
				return fail("decilm-n-heads-in-group", "layer %d: num_attention_heads // n_heads_in_group fails (%v)", i, b.att["n_heads_in_group"])
			}
			w.attention(i, hidden, heads, heads/g, hd)
			residual = true
		}
		if !truthy(b.ffn["no_op"]) {
			mult, ok := ffnMultAttr(b.ffn, hidden)
			is, hasIS := intNum(b.ffn["intermediate_size"])
			switch {
			case ok:
				w.mlp(i, hidden, ffnMultWidth(mult, hidden))
			case intermediateIfNoMult && hasIS:
				w.mlp(i, hidden, is)
			default:
				return fail("decilm-ffn-mult-only", "layer %d: block_config.ffn.ffn_mult is missing (AttributeError)", i)
			}
			if !residual {
				return fail("decilm-first-attention", "layer %d: post_attention_layernorm(hidden_states, None) returns one tensor where two are unpacked", i)
			}
		}
	}
	return weights(c, w)
}

// vllmLoad restates vLLM: DeciLMForCausalLM for DeciLM, the registered
// class otherwise. LlamaAttention reads config.head_dim when set.
func vllmLoad(c *child) outcome {
	if !c.deciLM() {
		return nativeLoad(c, registeredNative)
	}
	return poolDeciLM(c, true, func(hidden, heads int) int { return headDimOr(c, hidden/heads) })
}

// sglangLoad restates SGLang: ModelConfig.get_total_num_kv_heads
// (srt/configs/model_config.py, 001adf56) first, which collects
// heads // n_heads_in_group over the blocks whose attention is not a no_op
// and raises ValueError when the set has more than one value; then the
// DeciLM class. llama.py reads getattr(config, "head_dim", hidden // heads).
func sglangLoad(c *child) outcome {
	if !c.deciLM() {
		return nativeLoad(c, registeredNative)
	}
	if o := autoConfig(c); !o.ok() {
		return o
	}
	heads, _ := intNum(c.cfg["num_attention_heads"])
	kv := map[int]bool{}
	for _, b := range blocks(c) {
		if !truthy(b.att["no_op"]) {
			if g, ok := intNum(b.att["n_heads_in_group"]); ok && g > 0 {
				kv[heads/g] = true
			}
		}
	}
	if len(kv) > 1 {
		return fail("decilm-uniform-kv", "get_total_num_kv_heads: ValueError Variable GQA (VGQA) is not yet supported for nemotron-nas in sglang (%d KV-head counts)", len(kv))
	}
	return poolDeciLM(c, false, func(hidden, heads int) int { return headDimOr(c, hidden/heads) })
}

// trtllmLoad restates TensorRT-LLM's NemotronNASModel and
// NemotronNASDecoderLayer (tensorrt_llm/_torch/models/
// modeling_nemotron_nas.py, 0193dbd4): per-layer num_key_value_heads
// (0 for a no_op), widths from ffn_mult, and a forward pass that adds each
// residual explicitly (no first-block problem).
func trtllmLoad(c *child) outcome {
	if !c.deciLM() {
		return nativeLoad(c, registeredNative)
	}
	if o := autoConfig(c); !o.ok() {
		return o
	}
	hidden, _ := intNum(c.cfg["hidden_size"])
	heads, _ := intNum(c.cfg["num_attention_heads"])
	hd := headDimOr(c, hidden/heads)
	w := want{}
	for i, b := range blocks(c) {
		if !truthy(b.att["no_op"]) {
			g, ok := intNum(b.att["n_heads_in_group"])
			if !ok || g <= 0 {
				return fail("decilm-n-heads-in-group", "layer %d: n_heads_in_group %v", i, b.att["n_heads_in_group"])
			}
			w.attention(i, hidden, heads, heads/g, hd)
		}
		if !truthy(b.ffn["no_op"]) {
			mult, ok := ffnMultAttr(b.ffn, hidden)
			if !ok {
				return fail("decilm-ffn-mult-only", "layer %d: block_config.ffn.ffn_mult is missing (AttributeError)", i)
			}
			w.mlp(i, hidden, ffnMultWidth(mult, hidden))
		}
	}
	return weights(c, w)
}

// ffnMultAttr is block_config.ffn.ffn_mult as the configuration module
// prune writes builds it (prune/remotecode/decilm/block_config.py,
// FFNConfig): the block's own ffn_mult, else one derived from an
// intermediate_size that is a multiple of 256 and round-trips; none
// otherwise.
func ffnMultAttr(ffn map[string]any, hidden int) (float64, bool) {
	if m, ok := num(ffn["ffn_mult"]); ok {
		return m, true
	}
	is, ok := intNum(ffn["intermediate_size"])
	if !ok || is%256 != 0 {
		return 0, false
	}
	m := 3 * float64(is) / (2 * float64(hidden))
	return m, ffnMultWidth(m, hidden) == is
}

// llamacppLoad restates llama.cpp's converter and graph for DeciLM:
// DeciModel.__init__ and set_vocab (conversion/deci.py, 2bbcf7fc), which
// read block_configs as raw dict keys and assert that the first block's
// ffn_mult is a float; LlamaHfVocab (gguf-py/gguf/vocab.py, 85f9d68b);
// key_length = hidden // heads against rope_dim = head_dim, which
// llm_build_deci asserts equal; and llm_build_deci's `if (n_ff == 0)
// continue;` before the residual add (src/models/deci.cpp, 75dc8f64).
func llamacppLoad(c *child, tokenizer map[string]any) outcome {
	if !c.deciLM() {
		return nativeLoad(c, registeredNative)
	}
	hidden, _ := intNum(c.cfg["hidden_size"])
	heads, _ := intNum(c.cfg["num_attention_heads"])
	var nHead, nKV, nFF []int
	var mult0 any
	for i, b := range c.cfg["block_configs"].([]any) {
		att, ffn := obj(obj(b)["attention"]), obj(obj(b)["ffn"])
		g, ok := att["n_heads_in_group"]
		if !ok {
			return fail("config", "layer %d: KeyError n_heads_in_group", i)
		}
		if g == nil {
			rl, ok := att["replace_with_linear"]
			if !ok {
				return fail("config", "layer %d: KeyError replace_with_linear", i)
			}
			h := 0
			if truthy(rl) {
				h = heads
			}
			nHead, nKV = append(nHead, h), append(nKV, 0)
		} else {
			gi, _ := intNum(g)
			nHead, nKV = append(nHead, heads), append(nKV, heads/gi)
		}
		m, ok := ffn["ffn_mult"]
		if !ok {
			return fail("decilm-ffn-mult-only", "layer %d: KeyError ffn_mult", i)
		}
		if i == 0 {
			mult0 = m
		}
		f := 0.0
		if m != nil {
			f, _ = num(m)
		}
		nFF = append(nFF, ffnMultWidth(f, hidden))
	}
	if mult0 != nil && !pyFloat(mult0) {
		return fail("decilm-ffn-mult-float", "assert isinstance(_ffn_multipliers[0], float) fails: %v", mult0)
	}
	vocab := 128256
	if v, ok := intNum(c.cfg["vocab_size"]); ok {
		vocab = v
	}
	if vocab != 128256 {
		if tokenizer == nil {
			return fail("decilm-tokenizer", "LlamaHfVocab: FileNotFoundError (no tokenizer.json)")
		}
		mod, dec := obj(tokenizer["model"]), obj(tokenizer["decoder"])
		bf, hasBF := mod["byte_fallback"]
		if mod["type"] == "BPE" && truthy(mod["ignore_merges"]) && !(hasBF && truthy(bf)) {
			return fail("decilm-tokenizer", "LlamaHfVocab: TypeError Llama 3 must be converted with BpeVocab")
		}
		if mod["type"] != "BPE" || !truthy(bf) || dec == nil || dec["type"] != "Sequence" {
			return fail("decilm-tokenizer", "LlamaHfVocab: FileNotFoundError Cannot find Llama BPE tokenizer")
		}
	}
	keyLength := hidden / heads
	if rope := headDimOr(c, keyLength); rope != keyLength {
		return fail("head-dim", "GGML_ASSERT(n_embd_head == hparams.n_rot): key_length %d, rope_dim %d", keyLength, rope)
	}
	w := want{}
	for i := range nHead {
		if nHead[i] > 0 && nKV[i] > 0 {
			w.attention(i, hidden, nHead[i], nKV[i], keyLength)
		}
		if nFF[i] > 0 {
			w.mlp(i, hidden, nFF[i])
		}
	}
	if o := weights(c, w); !o.ok() {
		return o
	}
	for i := range nHead {
		if nFF[i] == 0 && nHead[i] > 0 {
			return fail("decilm-attention-needs-ffn", "layer %d: n_ff 0 `continue`s before the attention output is added: another model", i)
		}
	}
	return outcome{}
}

func (c *child) deciLM() bool {
	a, _ := c.cfg["architectures"].([]any)
	return len(a) > 0 && a[0] == architecture.DeciLM
}

func headDimOr(c *child, def int) int {
	if hd, ok := intNum(c.cfg["head_dim"]); ok {
		return hd
	}
	return def
}

// tokenizerOf reads dir/tokenizer.json (nil when absent).
func tokenizerOf(dir string) map[string]any {
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var t map[string]any
	if json.Unmarshal(b, &t) != nil {
		return map[string]any{}
	}
	return t
}

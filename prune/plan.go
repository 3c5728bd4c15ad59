package prune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/export"
)

// PlanVersion is the only plan format version this package reads and writes.
const PlanVersion = 1

// Output formats a plan may request (Plan.OutputFormat).
const (
	// FormatNative writes the parent's own architecture; every layer of a
	// kind must then have the same shape.
	FormatNative = "native"
	// FormatDeciLM writes a Llama-family child as DeciLMForCausalLM
	// block_configs (per-layer KV groups, FFN widths and removed sub-blocks).
	FormatDeciLM = "decilm"
	// FormatPadded writes a per-layer child in the parent's architecture,
	// made uniform by zero-padding every layer to the widest one.
	FormatPadded = "padded"
)

// Plan says what a pruned child keeps of its parent. It is the JSON document
// read by "autocompress prune --plan" and documented in PLAN.md:
//
//	{
//	  "version": 1,
//	  "hidden": [0, 1, 3, ...],                // kept hidden channels (absent: all)
//	  "layers": [
//	    {"layer": 0, "heads": [0, 1, 4, 5], "neurons": [2, 7, 9]},
//	    {"layer": 3, "remove": true},
//	    {"layer": 5, "remove_attention": true},
//	    {"layer": 7, "kv_heads": [0, 2], "heads": [0, 1, 4, 5]},
//	    {"layer": 9, "mamba_heads": [0, 1, 2, 3, 8, 9, 10, 11]},
//	    {"layer": 10, "experts": [0, 2, 3, 5]}   // kept routed experts (MoE)
//	  ],
//	  "output_format": "native",               // optional: native | decilm | padded
//	  "engine": "vllm"                         // optional: vllm | sglang | trtllm | llamacpp | hf
//	}
//
// Every index refers to the PARENT (before pruning). Kept-index lists must be
// sorted ascending and free of duplicates: a plan with an unsorted list is
// rejected rather than silently re-ordered, since order defines the child's
// layout. An absent list keeps everything; an empty list is an error (use
// the remove fields to drop a sub-block). Layers without an entry are kept
// whole.
type Plan struct {
	Version int `json:"version"`
	// Hidden lists the kept hidden (residual) channels, applied to the
	// embedding, every norm, every projection and the LM head. Nil keeps all.
	Hidden []int `json:"hidden,omitempty"`
	// Layers holds per-layer entries, at most one per parent layer.
	Layers []LayerPlan `json:"layers,omitempty"`
	// OutputFormat is "native" (default), "decilm" or "padded".
	OutputFormat string `json:"output_format,omitempty"`
	// Engine names the serving engine(s) the child is for: one name, a
	// comma-separated list or "all"; prune checks the child's config against
	// their rules before writing and the finished output after.
	Engine string `json:"engine,omitempty"`
	// LowerTopK lets a plan keep fewer routed experts than the router's
	// top-k (num_experts_per_tok): the child's top-k is then lowered to
	// the experts kept, with a note. Without it such a plan is refused.
	LowerTopK bool `json:"lower_top_k,omitempty"`
}

// LayerPlan is what one parent layer keeps.
type LayerPlan struct {
	// Layer is the parent layer index.
	Layer int `json:"layer"`
	// Remove drops the whole layer (the following layers are renumbered).
	Remove bool `json:"remove,omitempty"`
	// RemoveAttention and RemoveMLP drop one sub-block of a layer that has
	// both (DeciLM "no_op"); not expressible in the native format.
	RemoveAttention bool `json:"remove_attention,omitempty"`
	RemoveMLP       bool `json:"remove_mlp,omitempty"`
	// Heads lists the kept query heads. With grouped-query attention the
	// same number must be kept in every kept KV group.
	Heads []int `json:"heads,omitempty"`
	// KVHeads lists the kept KV groups (nil keeps all). Query heads of a
	// removed group must not be listed in Heads. Varying KV groups between
	// layers needs the decilm or padded format.
	KVHeads []int `json:"kv_heads,omitempty"`
	// Neurons lists the kept MLP (FFN intermediate) neurons.
	Neurons []int `json:"neurons,omitempty"`
	// MambaHeads lists the kept Mamba2 heads; the same number must be kept
	// in every Mamba group (n_groups).
	MambaHeads []int `json:"mamba_heads,omitempty"`
	// MambaHeadDim lists the channels kept within every Mamba2 head
	// (indices below mamba_head_dim; the same channels in every head, and
	// the same count in every Mamba layer, since mamba_head_dim is global).
	MambaHeadDim []int `json:"mamba_head_dim,omitempty"`
	// Experts lists the kept routed experts of an MoE layer: their weights
	// and their router rows (and router biases) are kept, in this order;
	// shared experts are always kept. Every MoE layer must keep the same
	// number (num_experts is one config value in every engine).
	Experts []int `json:"experts,omitempty"`
}

// PlanError reports every problem found in a plan; each Issue names the
// layer (or -1 for global fields) and the JSON field.
type PlanError struct {
	// Source is the file the plan came from, if known.
	Source string
	Issues []Issue
}

// Issue is one problem in a plan.
type Issue struct {
	Layer int    // parent layer index, -1 for a global field
	Field string // JSON field name, e.g. "heads"
	Msg   string
}

func (i Issue) String() string {
	if i.Layer < 0 {
		return fmt.Sprintf("%s: %s", i.Field, i.Msg)
	}
	return fmt.Sprintf("layer %d: %s: %s", i.Layer, i.Field, i.Msg)
}

func (e *PlanError) Error() string {
	var b strings.Builder
	b.WriteString("invalid pruning plan")
	if e.Source != "" {
		b.WriteString(" " + e.Source)
	}
	if len(e.Issues) == 1 {
		b.WriteString(": " + e.Issues[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, " (%d problems):", len(e.Issues))
	for _, i := range e.Issues {
		b.WriteString("\n  " + i.String())
	}
	return b.String()
}

func (e *PlanError) add(layer int, field, format string, a ...any) {
	e.Issues = append(e.Issues, Issue{Layer: layer, Field: field, Msg: fmt.Sprintf(format, a...)})
}

func (e *PlanError) errOrNil() error {
	if len(e.Issues) == 0 {
		return nil
	}
	return e
}

// maxPlanBytes caps the size of a plan file: a plan lists indices, and even a
// 405B model's full plan is a few MiB.
const maxPlanBytes = 256 << 20

// ReadPlan decodes and checks a plan (its structure only; Check validates it
// against a model). Unknown fields are rejected so that typos do not silently
// keep everything.
func ReadPlan(r io.Reader) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading pruning plan: %w", err)
	}
	if len(data) > maxPlanBytes {
		return nil, fmt.Errorf("pruning plan larger than %d MiB", maxPlanBytes>>20)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("pruning plan: JSON syntax error at byte offset %d: %w", se.Offset, err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("pruning plan: field %q at byte offset %d: want %s, got %s (see prune/PLAN.md)", te.Field, te.Offset, jsonKind(te.Type), te.Value)
		}
		return nil, fmt.Errorf("pruning plan: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("pruning plan: trailing data after the JSON object at byte offset %d", dec.InputOffset())
	}
	if len(p.Layers) == 0 {
		p.Layers = nil // "layers": [] keeps every layer, like no entry
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// LoadPlan reads a plan file.
func LoadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ReadPlan(f)
	if err != nil {
		var pe *PlanError
		if errors.As(err, &pe) {
			pe.Source = path
			return nil, pe
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Write encodes the plan as indented JSON.
func (p *Plan) Write(w io.Writer) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Validate checks what can be checked without the parent model: version,
// format names, layer entries and index lists (non-negative, ascending, no
// duplicates, not empty), contradictory removal fields.
func (p *Plan) Validate() error {
	e := &PlanError{}
	if p.Version != PlanVersion {
		e.add(-1, "version", "got %d, this autocompress reads version %d", p.Version, PlanVersion)
	}
	switch p.OutputFormat {
	case "", FormatNative, FormatDeciLM, FormatPadded:
	default:
		e.add(-1, "output_format", "unknown format %q (want native, decilm or padded)", p.OutputFormat)
	}
	if _, err := export.ParseEngines(p.Engine); err != nil {
		e.add(-1, "engine", "%v (or a comma-separated list, or all)", err)
	}
	checkList(e, -1, "hidden", p.Hidden)
	seen := map[int]bool{}
	for i, lp := range p.Layers {
		if lp.Layer < 0 {
			e.add(-1, fmt.Sprintf("layers[%d].layer", i), "negative layer index %d", lp.Layer)
			continue
		}
		if seen[lp.Layer] {
			e.add(lp.Layer, "layer", "more than one entry for this layer (entry %d)", i)
		}
		seen[lp.Layer] = true
		if lp.Remove && (lp.RemoveAttention || lp.RemoveMLP || lp.Heads != nil || lp.KVHeads != nil || lp.Neurons != nil || lp.MambaHeads != nil || lp.MambaHeadDim != nil || lp.Experts != nil) {
			e.add(lp.Layer, "remove", "a removed layer cannot also list kept indices or sub-block removals")
		}
		if lp.RemoveAttention && (lp.Heads != nil || lp.KVHeads != nil) {
			e.add(lp.Layer, "remove_attention", "attention is removed but heads or kv_heads are listed")
		}
		if lp.RemoveMLP && lp.Neurons != nil {
			e.add(lp.Layer, "remove_mlp", "the MLP is removed but neurons are listed")
		}
		checkList(e, lp.Layer, "heads", lp.Heads)
		checkList(e, lp.Layer, "kv_heads", lp.KVHeads)
		checkList(e, lp.Layer, "neurons", lp.Neurons)
		checkList(e, lp.Layer, "mamba_heads", lp.MambaHeads)
		checkList(e, lp.Layer, "experts", lp.Experts)
		checkList(e, lp.Layer, "mamba_head_dim", lp.MambaHeadDim)
	}
	return e.errOrNil()
}

// checkList checks a kept-index list: non-nil lists must be non-empty,
// non-negative, strictly ascending.
func checkList(e *PlanError, layer int, field string, idx []int) {
	if idx == nil {
		return
	}
	if len(idx) == 0 {
		what := "everything"
		switch field {
		case "heads", "kv_heads":
			what = "every head; use \"remove_attention\": true to drop the attention block"
		case "neurons":
			what = "every neuron; use \"remove_mlp\": true to drop the MLP"
		case "mamba_heads":
			what = "every Mamba head; use \"remove\": true to drop the layer"
		case "mamba_head_dim":
			what = "every channel of the Mamba heads; use \"remove\": true to drop the layer"
		case "experts":
			what = "every routed expert of the layer; keep at least num_experts_per_tok of them (or one, with lower_top_k), or use \"remove\": true to drop the layer"
		case "hidden":
			what = "every hidden channel"
		}
		e.add(layer, field, "empty list would remove %s", what)
		return
	}
	for i, v := range idx {
		if v < 0 {
			e.add(layer, field, "negative index %d at position %d", v, i)
			return
		}
		if i > 0 && v == idx[i-1] {
			e.add(layer, field, "index %d duplicated (positions %d and %d)", v, i-1, i)
			return
		}
		if i > 0 && v < idx[i-1] {
			e.add(layer, field, "not sorted ascending: %d after %d at position %d (list kept indices in ascending order)", v, idx[i-1], i)
			return
		}
	}
}

// layerPlan returns the entry for parent layer l, or nil.
func (p *Plan) layerPlan(l int) *LayerPlan {
	for i := range p.Layers {
		if p.Layers[i].Layer == l {
			return &p.Layers[i]
		}
	}
	return nil
}

// Format returns the plan's output format, "native" when unset.
func (p *Plan) Format() string {
	if p.OutputFormat == "" {
		return FormatNative
	}
	return p.OutputFormat
}

// sortLayers orders layer entries by parent layer index.
func (p *Plan) sortLayers() {
	sort.SliceStable(p.Layers, func(i, j int) bool { return p.Layers[i].Layer < p.Layers[j].Layer })
}

// jsonKind names a Go type the way a plan's author thinks of it: as JSON.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list (JSON array) of " + jsonKinds(t.Elem())
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return t.String()
}

// jsonKinds is the plural of jsonKind, for list elements.
func jsonKinds(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "lists"
	case reflect.Map, reflect.Struct:
		return "objects"
	case reflect.Pointer:
		return jsonKinds(t.Elem())
	case reflect.Float32, reflect.Float64:
		return "numbers"
	case reflect.String:
		return "strings"
	case reflect.Bool:
		return "booleans"
	}
	if k := jsonKind(t); strings.HasPrefix(k, "an ") {
		return k[3:] + "s"
	}
	return t.String()
}

package hardware

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxFileSize caps the size of a device file.
const MaxFileSize = 1 << 20

// FormatError reports a malformed device file, with the line where known.
type FormatError struct {
	File string
	Line int // 1-based; 0 when not known
	Msg  string
}

func (e *FormatError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "device file"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", loc, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// ParseFile reads devices from a YAML or JSON file; see Parse. A device
// without a name is named after the file (base name without extension).
func ParseFile(path string) ([]GPU, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading device file: %w", err)
	}
	if st.Size() > MaxFileSize {
		return nil, &FormatError{File: path, Msg: fmt.Sprintf("file is %d bytes, more than the %d allowed", st.Size(), MaxFileSize)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading device file: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	gs, err := Parse(data, name)
	if err != nil {
		if fe, ok := err.(*FormatError); ok && fe.File == "" {
			fe.File = path
		}
		return nil, err
	}
	return gs, nil
}

// Parse reads one or more devices from YAML or JSON.
//
// JSON: an object (one device), an array of objects, or {"devices": [...]}.
// YAML: a subset — nested mappings by indentation, scalars, '#' comments and
// "---" between several devices (no lists, anchors or flow style).
//
// Keys of one device (all optional except memory, bandwidth and BF16 rate):
//
//	name, description, backend (cuda|metal|cpu), source
//	memory_bytes | memory_gib | memory_gb
//	usable_fraction                (0,1]
//	bandwidth_bps | bandwidth_gbs  memory bandwidth
//	bf16_tflops, fp16acc_tflops, fp8_tflops, fp4_tflops, int8_tflops
//	link (nvlink|pcie|unified), link_gbs, gpus_per_node
//
// AIConfigurator's systems/*.yaml layout is also accepted: gpu.mem_bw,
// gpu.mem_capacity, gpu.{bfloat16,fp8,fp4,int8}_tc_flops,
// node.intra_node_bw, node.num_gpus_per_node. defaultName names a device
// that has no "name" key.
func Parse(data []byte, defaultName string) ([]GPU, error) {
	if len(data) > MaxFileSize {
		return nil, &FormatError{Msg: fmt.Sprintf("input is %d bytes, more than the %d allowed", len(data), MaxFileSize)}
	}
	trim := bytes.TrimSpace(data)
	var docs []map[string]any
	if len(trim) > 0 && (trim[0] == '{' || trim[0] == '[') {
		var v any
		if err := json.Unmarshal(trim, &v); err != nil {
			return nil, &FormatError{Msg: "invalid JSON: " + err.Error()}
		}
		switch t := v.(type) {
		case []any:
			for i, e := range t {
				m, ok := e.(map[string]any)
				if !ok {
					return nil, &FormatError{Msg: fmt.Sprintf("element %d of the array is not an object", i)}
				}
				docs = append(docs, m)
			}
		case map[string]any:
			if d, ok := t["devices"].([]any); ok {
				for i, e := range d {
					m, ok := e.(map[string]any)
					if !ok {
						return nil, &FormatError{Msg: fmt.Sprintf("devices[%d] is not an object", i)}
					}
					docs = append(docs, m)
				}
			} else {
				docs = append(docs, t)
			}
		}
	} else {
		var err error
		docs, err = ParseYAML(data)
		if err != nil {
			return nil, err
		}
	}
	if len(docs) == 0 {
		return nil, &FormatError{Msg: "no device found (empty file)"}
	}
	out := make([]GPU, 0, len(docs))
	for i, d := range docs {
		name := defaultName
		if len(docs) > 1 {
			name = fmt.Sprintf("%s-%d", defaultName, i+1)
		}
		g, err := fromMap(d, name)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func fromMap(d map[string]any, defaultName string) (GPU, error) {
	var g GPU
	var errs []string
	num := func(m map[string]any, key string) (float64, bool) {
		v, ok := m[key]
		if !ok {
			return 0, false
		}
		switch t := v.(type) {
		case float64:
			return t, true
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				errs = append(errs, fmt.Sprintf("%s: %q is not a number", key, t))
				return 0, false
			}
			return f, true
		default:
			errs = append(errs, fmt.Sprintf("%s: expected a number", key))
			return 0, false
		}
	}
	str := func(m map[string]any, key string) string {
		if s, ok := m[key].(string); ok {
			return strings.TrimSpace(s)
		}
		return ""
	}
	g.Name = str(d, "name")
	if g.Name == "" {
		g.Name = defaultName
	}
	g.Description = str(d, "description")
	g.Source = str(d, "source")
	g.Backend = Backend(strings.ToLower(str(d, "backend")))
	switch g.Backend {
	case "", CUDA, Metal, CPU:
	default:
		errs = append(errs, fmt.Sprintf("backend: %q is not one of cuda, metal, cpu", g.Backend))
	}
	if v, ok := num(d, "memory_bytes"); ok {
		g.MemoryBytes = int64(v)
	}
	if v, ok := num(d, "memory_gib"); ok {
		g.MemoryBytes = int64(v * gib)
	}
	if v, ok := num(d, "memory_gb"); ok {
		g.MemoryBytes = int64(v * 1e9)
	}
	if v, ok := num(d, "usable_fraction"); ok {
		g.UsableFraction = v
	}
	if v, ok := num(d, "bandwidth_bps"); ok {
		g.BandwidthBps = v
	}
	if v, ok := num(d, "bandwidth_gbs"); ok {
		g.BandwidthBps = v * gb
	}
	for key, dst := range map[string]*float64{
		"bf16_tflops": &g.BF16FLOPS, "fp16acc_tflops": &g.FP16AccFLOPS, "fp8_tflops": &g.FP8FLOPS,
		"fp4_tflops": &g.FP4FLOPS, "int8_tflops": &g.INT8FLOPS,
	} {
		if v, ok := num(d, key); ok {
			*dst = v * tb
		}
	}
	if s := str(d, "link"); s != "" {
		g.Link = LinkKind(strings.ToLower(s))
	}
	if v, ok := num(d, "link_gbs"); ok {
		g.LinkBps = v * gb
	}
	if v, ok := num(d, "gpus_per_node"); ok {
		if v < 1 || v != math.Trunc(v) || v > 1<<16 {
			errs = append(errs, fmt.Sprintf("gpus_per_node: %g is not a whole number of GPUs ≥ 1", v))
		}
		g.GPUsPerNode = int(v)
	}
	// AIConfigurator layout.
	if gm, ok := d["gpu"].(map[string]any); ok {
		if v, ok := num(gm, "mem_bw"); ok {
			g.BandwidthBps = v
		}
		if v, ok := num(gm, "mem_capacity"); ok {
			g.MemoryBytes = int64(v)
		}
		for key, dst := range map[string]*float64{
			"bfloat16_tc_flops": &g.BF16FLOPS, "fp8_tc_flops": &g.FP8FLOPS,
			"fp4_tc_flops": &g.FP4FLOPS, "int8_tc_flops": &g.INT8FLOPS,
		} {
			if v, ok := num(gm, key); ok {
				*dst = v
			}
		}
		if g.Source == "" {
			g.Source = "AIConfigurator system file"
		}
	}
	if nm, ok := d["node"].(map[string]any); ok {
		if v, ok := num(nm, "intra_node_bw"); ok {
			g.LinkBps = v
		}
		if v, ok := num(nm, "num_gpus_per_node"); ok {
			g.GPUsPerNode = int(v)
		}
		if g.Link == "" {
			if g.LinkBps >= 200*gb {
				g.Link = NVLink
			} else {
				g.Link = PCIe
			}
		}
	}
	if len(errs) > 0 {
		return g, &FormatError{Msg: fmt.Sprintf("device %q: %s", g.Name, strings.Join(errs, "; "))}
	}
	if g.UsableFraction == 0 {
		g.UsableFraction = 1
	}
	if g.Backend == "" {
		g.Backend = CUDA
	}
	if g.Source == "" {
		g.Source = "user file"
	}
	if g.GPUsPerNode == 0 {
		g.GPUsPerNode = 1
	}
	if err := g.Validate(); err != nil {
		return g, &FormatError{Msg: err.Error() + " (set memory_gib, bandwidth_gbs and bf16_tflops)"}
	}
	return g, nil
}

// ParseYAML parses the YAML subset described at Parse into one map per
// document. Values are strings or nested maps.
func ParseYAML(data []byte) ([]map[string]any, error) {
	type frame struct {
		indent int
		m      map[string]any
	}
	var docs []map[string]any
	var stack []frame
	var cur map[string]any
	pendingKey := "" // a "key:" with no value waiting for an indented block
	pendingLine := 0
	var pendingParent map[string]any
	start := func() {
		cur = map[string]any{}
		docs = append(docs, cur)
		stack = []frame{{indent: -1, m: cur}}
		pendingKey = ""
	}
	closePending := func() {
		if pendingKey != "" {
			pendingParent[pendingKey] = ""
			pendingKey = ""
		}
	}
	lines := strings.Split(string(data), "\n")
	for i, raw := range lines {
		ln := i + 1
		line := strings.TrimRight(raw, "\r")
		if strings.HasPrefix(line, "---") && strings.TrimSpace(line[3:]) == "" {
			closePending()
			cur = nil
			continue
		}
		content := stripComment(line)
		if strings.TrimSpace(content) == "" {
			continue
		}
		if strings.ContainsRune(content, '\t') && strings.TrimLeft(content, " \t") != strings.TrimLeft(content, " ") {
			return nil, &FormatError{Line: ln, Msg: "tab in indentation; use spaces"}
		}
		indent := len(content) - len(strings.TrimLeft(content, " "))
		body := strings.TrimSpace(content)
		if strings.HasPrefix(body, "- ") || body == "-" {
			return nil, &FormatError{Line: ln, Msg: "lists are not supported in device files; use JSON for several devices or separate documents with ---"}
		}
		if strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[") || strings.HasPrefix(body, "&") || strings.HasPrefix(body, "*") {
			return nil, &FormatError{Line: ln, Msg: "flow style, anchors and aliases are not supported"}
		}
		if cur == nil {
			start()
		}
		colon := keyColon(body)
		if colon < 0 {
			return nil, &FormatError{Line: ln, Msg: fmt.Sprintf("expected \"key: value\", got %q", body)}
		}
		key := unquote(strings.TrimSpace(body[:colon]))
		val := strings.TrimSpace(body[colon+1:])
		if key == "" {
			return nil, &FormatError{Line: ln, Msg: "empty key"}
		}
		if pendingKey != "" {
			if indent > stack[len(stack)-1].indent {
				child := map[string]any{}
				pendingParent[pendingKey] = child
				stack = append(stack, frame{indent: indent, m: child})
				pendingKey = ""
			} else {
				closePending()
			}
		}
		for len(stack) > 1 && indent < stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		top := stack[len(stack)-1]
		if len(stack) > 1 && indent != top.indent {
			return nil, &FormatError{Line: ln, Msg: fmt.Sprintf("inconsistent indentation (%d spaces, block uses %d)", indent, top.indent)}
		}
		if len(stack) == 1 && top.indent == -1 {
			stack[0].indent = indent
			top = stack[0]
		} else if len(stack) == 1 && indent != top.indent {
			return nil, &FormatError{Line: ln, Msg: fmt.Sprintf("inconsistent indentation (%d spaces, block uses %d)", indent, top.indent)}
		}
		if len(stack) > 16 {
			return nil, &FormatError{Line: ln, Msg: "nesting deeper than 16 levels"}
		}
		if _, dup := top.m[key]; dup {
			return nil, &FormatError{Line: ln, Msg: fmt.Sprintf("duplicate key %q", key)}
		}
		if val == "" || val == "|" || val == ">" {
			if val != "" {
				return nil, &FormatError{Line: ln, Msg: "block scalars are not supported"}
			}
			pendingKey, pendingParent, pendingLine = key, top.m, ln
			continue
		}
		top.m[key] = unquote(val)
	}
	_ = pendingLine
	closePending()
	return docs, nil
}

// stripComment removes a '#' comment that is not inside quotes.
func stripComment(s string) string {
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '\'' || c == '"':
			q = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// keyColon returns the index of the ':' ending the key (followed by a space
// or the end of the line), skipping quoted keys.
func keyColon(s string) int {
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case (c == '\'' || c == '"') && i == 0:
			q = c
		case c == ':' && (i+1 == len(s) || s[i+1] == ' '):
			return i
		}
	}
	return -1
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

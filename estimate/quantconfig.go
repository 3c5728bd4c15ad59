package estimate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ConfigPrecision returns the weight precision a config.json's
// quantization_config declares, as a name LookupPrecision accepts:
//
//   - quant_method "fp8" (HF FineGrainedFP8): fp8-block with
//     weight_block_size, else fp8; "fbgemm_fp8" is fp8;
//   - "mxfp4" (gpt-oss): mxfp4;
//   - "awq" and "gptq" with 4 bits ("bits", or AutoAWQ's "w_bit"):
//     int4-awq and int4-gptq;
//   - "modelopt" (NVIDIA ModelOpt): quant_algo FP8 is fp8, FP8_PB_WO
//     fp8-block, NVFP4 nvfp4, W4A16_AWQ int4-awq;
//   - "compressed-tensors" (llm-compressor): read from the weights of its
//     config_groups: 8-bit float is fp8 (fp8-block with the "block"
//     strategy), 4-bit float in groups of 16 nvfp4, 4-bit float in groups
//     of 32 mxfp4, 4-bit int int4-gptq (the W4A16 Marlin kernels GPTQ uses).
//
// It returns "" and no error when the config has no quantization_config.
// A quantization_config the estimator cannot price (an unknown method,
// 8-bit integer weights, bitsandbytes, ...) is an error naming what it
// declares, so that no checkpoint is silently priced as bf16.
//
// The tree is the one architecture.Model.Raw holds: numbers may be
// json.Number (architecture decodes with UseNumber), float64 or int.
func ConfigPrecision(raw map[string]any) (string, error) {
	qv, ok := raw["quantization_config"]
	if !ok || qv == nil {
		return "", nil
	}
	q, ok := qv.(map[string]any)
	if !ok {
		return "", &QuantConfigError{Msg: fmt.Sprintf("quantization_config is %T, want an object", qv)}
	}
	method := strings.ToLower(str(q["quant_method"]))
	unsupported := func(what string) (string, error) {
		return "", &QuantConfigError{Method: method, Msg: what}
	}
	switch method {
	case "fp8":
		if _, ok := q["weight_block_size"]; ok {
			return "fp8-block", nil
		}
		return "fp8", nil
	case "fbgemm_fp8":
		return "fp8", nil
	case "mxfp4":
		return "mxfp4", nil
	case "awq", "gptq":
		bits, ok := num(q["bits"])
		if !ok {
			bits, ok = num(q["w_bit"])
		}
		if !ok {
			return unsupported("no bits")
		}
		if bits != 4 {
			return unsupported(fmt.Sprintf("%g-bit weights (only 4-bit %s is priced)", bits, method))
		}
		if method == "awq" {
			return "int4-awq", nil
		}
		return "int4-gptq", nil
	case "modelopt":
		algo := strings.ToUpper(str(q["quant_algo"]))
		switch algo {
		case "FP8":
			return "fp8", nil
		case "FP8_PB_WO", "FP8_BLOCK":
			return "fp8-block", nil
		case "NVFP4":
			return "nvfp4", nil
		case "W4A16_AWQ":
			return "int4-awq", nil
		}
		return unsupported(fmt.Sprintf("quant_algo %q", algo))
	case "compressed-tensors":
		return compressedTensors(q)
	case "":
		return unsupported("no quant_method")
	}
	return unsupported("an unknown quant_method")
}

// compressedTensors reads the weight scheme of a compressed-tensors config:
// every config group must agree on one precision.
func compressedTensors(q map[string]any) (string, error) {
	groups, _ := q["config_groups"].(map[string]any)
	if len(groups) == 0 {
		return "", &QuantConfigError{Method: "compressed-tensors", Msg: "no config_groups"}
	}
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	got := ""
	for _, k := range names {
		g, _ := groups[k].(map[string]any)
		w, _ := g["weights"].(map[string]any)
		if w == nil {
			return "", &QuantConfigError{Method: "compressed-tensors", Msg: k + " has no weights scheme"}
		}
		bits, _ := num(w["num_bits"])
		typ := strings.ToLower(str(w["type"]))
		strategy := strings.ToLower(str(w["strategy"]))
		gs, _ := num(w["group_size"])
		p := ""
		switch {
		case typ == "float" && bits == 8 && strategy == "block":
			p = "fp8-block"
		case typ == "float" && bits == 8:
			p = "fp8"
		case typ == "float" && bits == 4 && gs == 16:
			p = "nvfp4"
		case typ == "float" && bits == 4 && gs == 32:
			p = "mxfp4"
		case typ == "int" && bits == 4:
			p = "int4-gptq"
		default:
			return "", &QuantConfigError{Method: "compressed-tensors",
				Msg: fmt.Sprintf("%s: %g-bit %s weights (strategy %q, group_size %g)", k, bits, orStr(typ, "untyped"), strategy, gs)}
		}
		if got != "" && p != got {
			return "", &QuantConfigError{Method: "compressed-tensors", Msg: fmt.Sprintf("config groups mix %s and %s weights", got, p)}
		}
		got = p
	}
	return got, nil
}

// QuantConfigError is a quantization_config the estimator cannot price.
type QuantConfigError struct {
	Method string // quant_method, lower case ("" when absent)
	Msg    string
}

func (e *QuantConfigError) Error() string { return e.Spell(nil) }

// Spell returns the message with the precision setting ("precision") spelled by spell
// (a command's flags); nil gives the library's words (Error).
func (e *QuantConfigError) Spell(spell func(name string) string) string {
	with := "as the precision"
	if spell != nil {
		with = "with " + spell("precision")
	}
	m := "quantization_config"
	if e.Method != "" {
		m += " (quant_method " + strconv.Quote(e.Method) + ")"
	}
	return m + ": " + e.Msg + "; no precision is known for it: pass the deployed one " + with + " (" + strings.Join(Precisions(), ", ") + ")"
}

// num reads a JSON number from a decoded tree: json.Number, float64, int or
// a numeric string.
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

func orStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

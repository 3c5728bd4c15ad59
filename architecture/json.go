package architecture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// NonFinite is a bare Infinity, -Infinity or NaN read from a config written
// by Python's json module. It is kept in Model.Raw and written back bare.
type NonFinite string

// Values of NonFinite.
const (
	PosInf NonFinite = "Infinity"
	NegInf NonFinite = "-Infinity"
	NaN    NonFinite = "NaN"
)

// Float returns the float64 value.
func (n NonFinite) Float() float64 {
	switch n {
	case PosInf:
		return math.Inf(1)
	case NegInf:
		return math.Inf(-1)
	}
	return math.NaN()
}

// nonFiniteMark prefixes the string that stands for a bare non-finite token
// between the pre-pass and the decoder. A NUL never occurs in a real key or
// value of a config, and the decoder keeps it.
const nonFiniteMark = "\x00autocompress:"

// quoteNonFinite rewrites the bare tokens Infinity, -Infinity and NaN that
// occur outside strings into marked strings, so that encoding/json can decode
// the document. Strings are skipped with their escapes; anything else is
// copied unchanged (the decoder reports real syntax errors).
func quoteNonFinite(data []byte) []byte {
	if !bytes.Contains(data, []byte("Infinity")) && !bytes.Contains(data, []byte("NaN")) {
		return data
	}
	out := make([]byte, 0, len(data)+32)
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(data) {
				j++
			} else {
				j = len(data)
			}
			out = append(out, data[i:j]...)
			i = j
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			out = appendMarked(out, NegInf)
			i += len("-Infinity")
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			out = appendMarked(out, PosInf)
			i += len("Infinity")
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			out = appendMarked(out, NaN)
			i += len("NaN")
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// appendMarked appends the JSON string standing for a bare token.
func appendMarked(out []byte, n NonFinite) []byte {
	out = append(out, `"\u0000autocompress:`...)
	out = append(out, n...)
	return append(out, '"')
}

// decodeJSON decodes a config document into a generic tree: objects as
// map[string]any, arrays as []any, numbers as json.Number (exact text kept),
// bare non-finite tokens as NonFinite.
func decodeJSON(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(quoteNonFinite(data)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ConfigError{Msg: fmt.Sprintf("not valid JSON: %v", err)}
	}
	if dec.More() {
		return nil, &ConfigError{Msg: "not valid JSON: trailing data after the top-level object"}
	}
	var rest [1]byte
	if n, _ := dec.Buffered().Read(rest[:]); n > 0 && !isSpace(rest[0]) {
		return nil, &ConfigError{Msg: "not valid JSON: trailing data after the top-level object"}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &ConfigError{Msg: fmt.Sprintf("top level is %s, want a JSON object", jsonKind(v))}
	}
	return unmarkNonFinite(obj).(map[string]any), nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func unmarkNonFinite(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = unmarkNonFinite(e)
		}
	case []any:
		for i, e := range x {
			x[i] = unmarkNonFinite(e)
		}
	case string:
		if s, ok := strings.CutPrefix(x, nonFiniteMark); ok {
			return NonFinite(s)
		}
	}
	return v
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, int, int64, NonFinite:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// pyFloat formats f the way Python's repr does for the values found in
// configs: integral values keep a ".0" (500000.0), small and large ones use
// an exponent (1e-05).
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', -1, 64) + ".0"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	return s
}

// encodeJSON writes v deterministically: object keys sorted, two-space
// indent, numbers as given (json.Number) or formatted like Python (float64),
// non-finite values bare as Python writes them.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encodeValue(&b, v, ""); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func encodeValue(b *bytes.Buffer, v any, indent string) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		s, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(s)
	case json.Number:
		b.WriteString(string(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case NonFinite:
		b.WriteString(string(x))
	case []int:
		arr := make([]any, len(x))
		for i, e := range x {
			arr[i] = e
		}
		return encodeValue(b, arr, indent)
	case []string:
		arr := make([]any, len(x))
		for i, e := range x {
			arr[i] = e
		}
		return encodeValue(b, arr, indent)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[\n")
		in := indent + "  "
		for i, e := range x {
			b.WriteString(in)
			if err := encodeValue(b, e, in); err != nil {
				return err
			}
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{\n")
		in := indent + "  "
		for i, k := range keys {
			ks, _ := json.Marshal(k)
			b.WriteString(in)
			b.Write(ks)
			b.WriteString(": ")
			if err := encodeValue(b, x[k], in); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if i < len(keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	default:
		return fmt.Errorf("cannot encode %T", v)
	}
	return nil
}

// deepCopyJSON copies a decoded JSON tree.
func deepCopyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = deepCopyJSON(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = deepCopyJSON(e)
		}
		return c
	}
	return v
}

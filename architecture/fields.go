package architecture

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// fields reads typed values out of one JSON object of a config, remembering
// the first error (sticky), so that a parser reads many fields and checks the
// error once. prefix is the JSON path of the object ("" at the top level,
// "block_configs[3].ffn." inside).
type fields struct {
	m      map[string]any
	prefix string
	err    error
}

func (f *fields) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

func (f *fields) bad(key, format string, a ...any) {
	f.fail(&ConfigError{Key: f.prefix + key, Msg: fmt.Sprintf(format, a...)})
}

// has reports whether key is present and not null.
func (f *fields) has(key string) bool {
	v, ok := f.m[key]
	return ok && v != nil
}

// present reports whether key is present (possibly null).
func (f *fields) present(key string) bool {
	_, ok := f.m[key]
	return ok
}

func (f *fields) number(key string) (float64, bool) {
	v, ok := f.m[key]
	if !ok || v == nil {
		return 0, false
	}
	switch x := v.(type) {
	case json.Number:
		g, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			f.bad(key, "number %s out of range", x)
			return 0, false
		}
		return g, true
	case float64:
		return x, true
	case int:
		return float64(x), true
	case NonFinite:
		return x.Float(), true
	}
	f.bad(key, "want a number, got %s", jsonKind(v))
	return 0, false
}

// intOr returns the integer at key, or def when absent or null.
func (f *fields) intOr(key string, def int) int {
	g, ok := f.number(key)
	if !ok {
		return def
	}
	return f.toInt(key, g)
}

func (f *fields) toInt(key string, g float64) int {
	if g != math.Trunc(g) || math.IsInf(g, 0) || math.IsNaN(g) {
		f.bad(key, "want an integer, got %v", g)
		return 0
	}
	if math.Abs(g) > 1<<53 {
		f.bad(key, "integer %v out of range", g)
		return 0
	}
	return int(g)
}

// reqInt returns the integer at key or records a *MissingFieldError.
func (f *fields) reqInt(key string) int {
	g, ok := f.number(key)
	if !ok {
		if f.err == nil {
			f.fail(&MissingFieldError{Key: f.prefix + key})
		}
		return 0
	}
	return f.toInt(key, g)
}

// firstInt returns the integer at the first present key, or def.
func (f *fields) firstInt(def int, keys ...string) int {
	for _, k := range keys {
		if f.has(k) {
			return f.intOr(k, def)
		}
	}
	return def
}

// floatOr returns the finite number at key, or def when absent or null.
// Non-finite values are refused: no field the model reads may be one.
func (f *fields) floatOr(key string, def float64) float64 {
	g, ok := f.number(key)
	if !ok {
		return def
	}
	if math.IsInf(g, 0) || math.IsNaN(g) {
		f.bad(key, "want a finite number, got %v", g)
		return def
	}
	return g
}

func (f *fields) firstFloat(def float64, keys ...string) float64 {
	for _, k := range keys {
		if f.has(k) {
			return f.floatOr(k, def)
		}
	}
	return def
}

func (f *fields) boolOr(key string, def bool) bool {
	v, ok := f.m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		f.bad(key, "want true or false, got %s", jsonKind(v))
		return def
	}
	return b
}

func (f *fields) strOr(key, def string) string {
	v, ok := f.m[key]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		f.bad(key, "want a string, got %s", jsonKind(v))
		return def
	}
	return s
}

func (f *fields) object(key string) (*fields, bool) {
	v, ok := f.m[key]
	if !ok || v == nil {
		return nil, false
	}
	o, ok := v.(map[string]any)
	if !ok {
		f.bad(key, "want an object, got %s", jsonKind(v))
		return nil, false
	}
	return &fields{m: o, prefix: f.prefix + key + "."}, true
}

func (f *fields) array(key string) ([]any, bool) {
	v, ok := f.m[key]
	if !ok || v == nil {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		f.bad(key, "want an array, got %s", jsonKind(v))
		return nil, false
	}
	return a, true
}

// intList reads an integer or a list of integers (eos_token_id).
func (f *fields) intList(key string) []int {
	v, ok := f.m[key]
	if !ok || v == nil {
		return nil
	}
	if a, ok := v.([]any); ok {
		out := make([]int, 0, len(a))
		for i, e := range a {
			sub := &fields{m: map[string]any{"v": e}, prefix: fmt.Sprintf("%s%s[%d]", f.prefix, key, i)}
			n := sub.intOr("v", 0)
			if sub.err != nil {
				f.bad(fmt.Sprintf("%s[%d]", key, i), "want an integer, got %s", jsonKind(e))
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	return []int{f.intOr(key, 0)}
}

// check records err (with the key) if cond is false.
func (f *fields) check(cond bool, key, format string, a ...any) {
	if !cond {
		f.bad(key, format, a...)
	}
}

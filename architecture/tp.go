package architecture

import (
	"fmt"
	"strings"
)

// TPViolation is one way a model's shape cannot be split over tensor
// parallelism: Layer is the decoder layer, Rule a short key ("tp-heads",
// "tp-kv-heads", "tp-mlp", "tp-mamba").
type TPViolation struct {
	Layer int
	Rule  string
	Msg   string
}

// TPViolations applies the tensor-parallel divisibility rules of the
// engines that shard every layer over TP GPUs (vLLM, SGLang, TensorRT-LLM):
// query heads, MLP widths and Mamba heads divide by tp; KV heads divide by
// tp or replicate evenly across it (tp % kv == 0); Mamba n_groups divide by
// tp unless there is one group. It is the one rule the estimator and the
// checkpoint validator share. tp ≤ 1 has no violations.
func (m *Model) TPViolations(tp int) []TPViolation {
	if tp <= 1 {
		return nil
	}
	var out []TPViolation
	add := func(i int, rule, format string, a ...any) {
		out = append(out, TPViolation{Layer: i, Rule: rule, Msg: fmt.Sprintf(format, a...)})
	}
	for i, l := range m.Layers {
		if a := l.Attention; a != nil {
			if a.Heads%tp != 0 {
				add(i, "tp-heads", "%d query heads are not divisible by TP %d", a.Heads, tp)
			}
			if a.KVHeads > 0 && a.KVHeads%tp != 0 && tp%a.KVHeads != 0 {
				add(i, "tp-kv-heads", "%d KV heads neither divide by TP %d nor replicate evenly across it", a.KVHeads, tp)
			}
		}
		if x := l.MLP; x != nil && x.Width%tp != 0 {
			add(i, "tp-mlp", "MLP width %d is not divisible by TP %d", x.Width, tp)
		}
		if x := l.Mamba; x != nil {
			if x.Heads%tp != 0 {
				add(i, "tp-mamba", "%d Mamba heads are not divisible by TP %d", x.Heads, tp)
			}
			if x.Groups%tp != 0 && x.Groups != 1 {
				add(i, "tp-mamba", "n_groups %d is not divisible by TP %d", x.Groups, tp)
			}
		}
	}
	return out
}

// TPError is a tensor-parallel degree the model's shape cannot be split
// over; it lists the distinct violations (the first layer of each).
type TPError struct {
	TP         int
	Violations []TPViolation
	// Valid lists the TP degrees up to 8 that the shape allows.
	Valid []int
}

func (e *TPError) Error() string {
	seen := map[string]bool{}
	var parts []string
	for _, v := range e.Violations {
		if seen[v.Msg] {
			continue
		}
		seen[v.Msg] = true
		parts = append(parts, fmt.Sprintf("layer %d: %s", v.Layer, v.Msg))
		if len(parts) == 4 {
			break
		}
	}
	valid := make([]string, len(e.Valid))
	for i, t := range e.Valid {
		valid[i] = fmt.Sprint(t)
	}
	return fmt.Sprintf("TP %d cannot split this model: %s; TP degrees this shape allows: %s",
		e.TP, strings.Join(parts, "; "), strings.Join(valid, ", "))
}

// CheckTP returns a *TPError when the model cannot be split over tp GPUs
// (see TPViolations).
func (m *Model) CheckTP(tp int) error {
	v := m.TPViolations(tp)
	if len(v) == 0 {
		return nil
	}
	e := &TPError{TP: tp, Violations: v}
	for t := 1; t <= 8; t++ {
		if len(m.TPViolations(t)) == 0 {
			e.Valid = append(e.Valid, t)
		}
	}
	return e
}

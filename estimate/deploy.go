package estimate

import (
	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// CheckModel reports a model this deployment cannot load: a TP degree its
// shape cannot be split over, for the engines that shard every layer over
// the TP group (vLLM, SGLang, TensorRT-LLM; the rule is
// architecture.Model.TPViolations, the one "autocompress validate" applies).
func (c *Compiled) CheckModel(m *architecture.Model) error {
	if c.r.eng.Pool() {
		return m.CheckTP(c.r.tp)
	}
	return nil
}

// FitTP returns the smallest TP degree above o.TP at which m fits on hw:
// at most the node's GPUs (o.GPUs, else hw.GPUsPerNode) and a degree the
// model's shape can be split over. It returns 0 when none does, and the
// largest degree it considered.
func FitTP(m *architecture.Model, hw *hardware.GPU, eng Engine, o Options, w *workload.Workload) (tp, maxTP int) {
	maxTP = o.GPUs
	if maxTP <= 0 {
		maxTP = max(hw.GPUsPerNode, 1)
	}
	for t := max(o.TP, 1) + 1; t <= maxTP; t++ {
		if eng.Pool() && len(m.TPViolations(t)) > 0 {
			continue
		}
		o2 := o
		o2.TP = t
		c, err := Compile(hw, eng, o2, w, nil)
		if err != nil {
			continue
		}
		var s Summary
		c.Summarize(&s, m)
		if _, ok := c.Memory(&s); ok {
			return t, maxTP
		}
	}
	return 0, maxTP
}

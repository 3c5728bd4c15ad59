package architecture

import "testing"

// BenchmarkParams measures Params and Tensors on the largest preset (Nemotron-3
// Super: 88 layers, 40 MoE layers of 512 experts, 41,643 tensors). It reports
// ns per tensor so that a regression to per-tensor formatting shows.
func BenchmarkParams(b *testing.B) {
	m, err := Preset("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
	if err != nil {
		b.Fatal(err)
	}
	n := len(m.Tensors())
	b.Run("Params", func(b *testing.B) {
		for b.Loop() {
			m.Params()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tensor")
	})
	b.Run("Tensors", func(b *testing.B) {
		for b.Loop() {
			m.Tensors()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tensor")
	})
}

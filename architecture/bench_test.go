package architecture

import (
	"testing"
	"time"
)

// BenchmarkParams measures Params on the largest preset (Nemotron-3 Super:
// 88 layers, 40 MoE layers of 512 experts, 41,643 tensors) against a peer
// run in the same benchmark: materialising Tensors, which formats every
// name. It reports ns per tensor and the speed-up of Params over Tensors.
func BenchmarkParams(b *testing.B) {
	m, err := Preset("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
	if err != nil {
		b.Fatal(err)
	}
	n := len(m.Tensors())
	for b.Loop() {
		m.Params()
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	const peerRuns = 5
	start := time.Now()
	for range peerRuns {
		m.Tensors()
	}
	peer := float64(time.Since(start).Nanoseconds()) / peerRuns
	b.ReportMetric(perOp/float64(n), "ns/tensor")
	b.ReportMetric(peer/perOp, "x-vs-Tensors")
}

// BenchmarkFromConfig measures reading the largest real config shape (the
// Nemotron-3 Super preset) against a peer: decoding the same bytes with
// encoding/json alone, the floor for any reader of the format.
func BenchmarkFromConfig(b *testing.B) {
	data, err := presetFS.ReadFile("presets/" + presetFile("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := FromConfig(data); err != nil {
			b.Fatal(err)
		}
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	const peerRuns = 200
	start := time.Now()
	for range peerRuns {
		if _, err := decodeJSON(data); err != nil {
			b.Fatal(err)
		}
	}
	peer := float64(time.Since(start).Nanoseconds()) / peerRuns
	b.ReportMetric(perOp/peer, "x-json-decode")
}

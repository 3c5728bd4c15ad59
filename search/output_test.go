package search

import (
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
)

// TestServingCommands: the serving command line realises the chosen
// settings in each engine's own flags (vLLM and SGLang share one builder),
// with --trust-remote-code for a per-layer (DeciLM) child only.
func TestServingCommands(t *testing.T) {
	_, small := smallSpace(t)
	m := small.Parent
	st := Settings{Precision: "fp8", KVDType: "fp8", MaxNumSeqs: 16, MemFraction: 0.85}
	uniform := Candidate{Hidden: 1024, Heads: 16, Settings: st}
	for range m.Layers {
		uniform.Layers = append(uniform.Layers, LayerShape{KVGroups: 4, MLP: 2048})
	}
	perLayer := uniform
	perLayer.Layers = append([]LayerShape(nil), uniform.Layers...)
	perLayer.Layers[1].MLP = 1024
	for _, tc := range []struct {
		engine estimate.Engine
		c      Candidate
		want   string
	}{
		{estimate.VLLM, uniform, "vllm serve DIR --max-model-len 4096 --tensor-parallel-size 1 --gpu-memory-utilization 0.85 --max-num-seqs 16 --kv-cache-dtype fp8 --quantization fp8"},
		{estimate.VLLM, perLayer, "vllm serve DIR --max-model-len 4096 --tensor-parallel-size 1 --gpu-memory-utilization 0.85 --max-num-seqs 16 --kv-cache-dtype fp8 --quantization fp8 --trust-remote-code"},
		{estimate.SGLang, uniform, "python -m sglang.launch_server --model-path DIR --context-length 4096 --tp 1 --mem-fraction-static 0.85 --max-running-requests 16 --kv-cache-dtype fp8_e4m3 --quantization fp8"},
		{estimate.SGLang, perLayer, "python -m sglang.launch_server --model-path DIR --context-length 4096 --tp 1 --mem-fraction-static 0.85 --max-running-requests 16 --kv-cache-dtype fp8_e4m3 --quantization fp8 --trust-remote-code"},
		{estimate.VLLM, Candidate{Hidden: 1024, Heads: 16, Layers: uniform.Layers}, "vllm serve DIR --max-model-len 4096 --tensor-parallel-size 1"},
		{estimate.SGLang, Candidate{Hidden: 1024, Heads: 16, Layers: uniform.Layers}, "python -m sglang.launch_server --model-path DIR --context-length 4096 --tp 1"},
	} {
		sp, err := NewSpace(m, SpaceOptions{Engine: tc.engine})
		if err != nil {
			t.Fatal(err)
		}
		if tc.c.Layers[1].MLP != 2048 && architecture.FormatFor(sp.Model(&tc.c)) != architecture.DeciLMFormat {
			t.Fatal("the per-layer case is not a DeciLM child")
		}
		r := Report{Space: sp, Result: &Result{Best: tc.c}, Workload: wl(t, "chat"), Estimate: estimate.Options{MaxModelLen: 4096}}
		if got := r.Serving().Command; got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.engine, got, tc.want)
		}
	}
}

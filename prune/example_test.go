package prune_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"github.com/autocompress/autocompress/prune"
)

// Reading a hand-written plan; unsorted lists are rejected with the layer
// and field named.
func ExampleReadPlan() {
	p, err := prune.ReadPlan(strings.NewReader(`{"version": 1, "hidden": [0, 2, 3],
	  "layers": [{"layer": 1, "remove": true}, {"layer": 2, "neurons": [4, 8, 15]}]}`))
	fmt.Println(len(p.Hidden), len(p.Layers), err)
	_, err = prune.ReadPlan(strings.NewReader(`{"version": 1, "layers": [{"layer": 2, "heads": [5, 1]}]}`))
	fmt.Println(err)
	// Output:
	// 3 2 <nil>
	// invalid pruning plan: layer 2: heads: not sorted ascending: 1 after 5 at position 1 (list kept indices in ascending order)
}

// Keeping the best query head of each KV group (4 groups of 2 heads).
func ExampleTopKGrouped() {
	scores := []float32{0.3, 0.9, 0.8, 0.1, 0.2, 0.4, 0.7, 0.6}
	keep, _ := prune.TopKGrouped(scores, 4, 1)
	fmt.Println(keep)
	// Output: [1 2 5 6]
}

// Resolving a plan against a model gives the child's shape; per-layer
// widths need the decilm or padded format.
func ExampleResolve() {
	m, _ := architecture.FromConfig([]byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
	  "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 8,
	  "num_hidden_layers": 3, "vocab_size": 100}`))
	plan := &prune.Plan{Version: 1, Layers: []prune.LayerPlan{{Layer: 0, Neurons: []int{1, 2, 3}}, {Layer: 2, Remove: true}}}
	_, err := prune.Resolve(m, plan)
	fmt.Println(err)
	plan.OutputFormat = "decilm"
	lay, _ := prune.Resolve(m, plan)
	for i, l := range lay.Child.Layers {
		fmt.Println(i, lay.Layers[i].Parent, l.MLP.Width, l.Attention.KVHeads)
	}
	// Output:
	// invalid pruning plan: layer 1: neurons: keeps 512 neurons but layer 0 keeps 3; per-layer MLP widths need output_format decilm (Llama family) or padded
	// 0 0 256 4
	// 1 1 512 4
}

// Pruning a (synthetic) sharded Llama checkpoint: hidden 32 → 24, one query
// head kept per KV group, the last layer dropped; the child is validated for
// vLLM before it is moved into place.
func ExamplePrune() {
	dir, _ := os.MkdirTemp("", "prune-example")
	defer os.RemoveAll(dir)
	m := testutil.Llama{Vocab: 64, Hidden: 32, Intermediate: 64, Heads: 8, KVHeads: 4, HeadDim: 4, Layers: 3}
	parent := filepath.Join(dir, "parent")
	if err := testutil.Write(parent, testutil.LlamaSpecs(m, checkpoint.BF16), testutil.Options{Shards: 2,
		Files: map[string][]byte{"config.json": testutil.LlamaConfig(m, checkpoint.BF16)}}); err != nil {
		fmt.Println(err)
		return
	}
	var hidden []int
	for i := 0; i < 24; i++ {
		hidden = append(hidden, i)
	}
	plan := &prune.Plan{Version: 1, Hidden: hidden, Engine: "vllm", Layers: []prune.LayerPlan{
		{Layer: 0, Heads: []int{0, 2, 4, 6}}, {Layer: 1, Heads: []int{1, 3, 5, 7}}, {Layer: 2, Remove: true},
	}}
	res, err := prune.Prune(context.Background(), prune.Options{Model: parent, Plan: plan, Out: filepath.Join(dir, "child")})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := res.Layout.Child
	fmt.Println(c.Arch, c.Hidden, len(c.Layers), c.Layers[0].Attention.Heads, c.Layers[0].Attention.KVHeads, res.Files)
	// Output: LlamaForCausalLM 24 2 4 4 [model-00001-of-00002.safetensors model-00002-of-00002.safetensors]
}

package architecture_test

import (
	"fmt"

	"github.com/autocompress/autocompress/architecture"
)

func ExampleLoad() {
	// A preset name, a config.json or a checkpoint directory.
	m, err := architecture.Load("mistralai/Mixtral-8x7B-v0.1")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := m.Params()
	fmt.Println(m.Arch, len(m.Layers), "layers")
	fmt.Printf("total %d, active %d\n", p.Total, p.Active)
	fmt.Println("KV bytes per token at bf16:", 2*m.KVElemsPerToken())
	// Output:
	// MixtralForCausalLM 32 layers
	// total 46702792704, active 12879925248
	// KV bytes per token at bf16: 131072
}

func ExampleFromConfig() {
	m, err := architecture.FromConfig([]byte(`{
	  "architectures": ["NemotronHForCausalLM"], "hidden_size": 1024, "vocab_size": 32000,
	  "hybrid_override_pattern": "M-M*-", "mamba_num_heads": 32, "mamba_head_dim": 64, "n_groups": 8,
	  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 4096,
	  "time_step_limit": [0.0, Infinity]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, l := range m.Layers {
		fmt.Println(i, l.Kind())
	}
	// Output:
	// 0 mamba
	// 1 mlp
	// 2 mamba
	// 3 attention
	// 4 mlp
}

func ExampleModel_Config() {
	m, _ := architecture.Preset("meta-llama/Meta-Llama-3.1-8B")
	child := m.Clone()
	child.Layers[3].MLP.Width = 7168 // per-layer width: needs DeciLM
	child.Layers[5].Attention = nil  // attention removed in layer 5
	fmt.Println(architecture.FormatFor(child))
	data, err := child.Config(architecture.ConfigOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	back, _ := architecture.FromConfig(data)
	fmt.Println(back.Arch, back.Layers[3].MLP.Width, back.Layers[5].Attention == nil)

	child.Layers[3].MLP.Width = 7000
	_, err = child.Config(architecture.ConfigOptions{})
	fmt.Println(err)
	// Output:
	// DeciLM
	// DeciLMForCausalLM 7168 true
	// cannot write DeciLM config: layer 3: FFN width 7000 is not a multiple of 256: engines that read ffn_mult round it up to 7168 and the weights would not load
}

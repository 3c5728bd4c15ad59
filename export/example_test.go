package export_test

import (
	"fmt"

	"github.com/autocompress/autocompress/export"
)

// A DeciLM FFN width survives the engines' ffn_mult rounding only when it is
// a multiple of 256.
func ExampleFFNMult() {
	m := export.FFNMult(14336, 8192)
	fmt.Println(m, export.DeciLMFFNWidth(m, 8192))
	fmt.Println(export.DeciLMFFNWidth(export.FFNMult(14000, 8192), 8192))
	// Output:
	// 2.625 14336
	// 14080
}

// Validating a config for the native engine, which reads intermediate_size,
// and llama.cpp, whose converter reads only ffn_mult.
func ExampleValidateConfig() {
	cfg := []byte(`{"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas",
	  "hidden_size": 64, "num_attention_heads": 8, "head_dim": 8, "vocab_size": 100,
	  "num_hidden_layers": 2, "rms_norm_eps": 1e-5,
	  "auto_map": {"AutoConfig": "configuration_decilm.DeciLMConfig"},
	  "block_configs": [
	    {"attention": {"n_heads_in_group": 2, "no_op": false}, "ffn": {"ffn_mult": 6.0, "no_op": false}},
	    {"attention": {"no_op": true}, "ffn": {"intermediate_size": 256, "no_op": false}}]}`)
	for _, engine := range []string{"native", "llamacpp"} {
		r, err := export.ValidateConfig(cfg, engine)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(engine, r.OK())
		for _, v := range r.Violations {
			fmt.Println(" ", v)
		}
	}
	// Output:
	// native true
	// llamacpp false
	//   layer 1: this block gives ffn.intermediate_size 256 but no ffn_mult: llama.cpp's DeciModel.__init__ (conversion/deci.py, 2bbcf7fc) reads only the ffn_mult key; write ffn_mult = 6 [decilm-ffn-mult-only]
}

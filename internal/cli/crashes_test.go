package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCrashesAndOverflows (issue 17, class 5): the reproducers of the
// crashes and overflows, through the commands. Each ends with its exit
// status and a message naming what is wrong, never a panic (which would
// stop this test) nor a wrapped sum that slips past a check.
func TestCrashesAndOverflows(t *testing.T) {
	dir := t.TempDir()
	config := func(name, fields string) string {
		p := filepath.Join(dir, name+".json")
		cfg := `{"architectures":["LlamaForCausalLM"],"hidden_size":256,"intermediate_size":512,"num_attention_heads":8,` +
			`"num_key_value_heads":4,"vocab_size":1000,"max_position_embeddings":4096,` + fields + `}`
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	negLayers := config("neg-layers", `"num_hidden_layers":-4`)
	negPositions := config("neg-positions", `"num_hidden_layers":2,"max_position_embeddings":-5`)
	huge := "9223372036854775807"
	csvIn := filepath.Join(dir, "in.csv")
	os.WriteFile(csvIn, []byte("id,model,gpu,engine,isl,osl,concurrency\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,100,10,"+huge+"\n"+
		"b,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,"+huge+","+huge+",1\n"), 0o644)
	out := func(name string) string { return filepath.Join(dir, name) }

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"estimate concurrency", []string{"estimate", "--isl", "100", "--osl", "10", "--concurrency", huge}, 2, "want an integer in [1, 65536]"},
		{"estimate lengths", []string{"estimate", "--isl", huge, "--osl", "10"}, 2, "-isl"},
		{"estimate lengths at their bound", []string{"estimate", "--isl", "67108864", "--osl", "67108864", "--analytic"}, 2, "needs 134217728 tokens"},
		{"estimate num-requests", []string{"estimate", "--rate", "inf", "--isl", "10", "--osl", "10", "--num-requests", huge}, 2, "-num-requests"},
		{"estimate context", []string{"estimate", "--context", huge}, 2, "-context"},
		{"estimate tp", []string{"estimate", "--tp", huge}, 2, "-tp"},
		{"inspect negative layers", []string{"inspect", "--model", negLayers}, 1, `"num_hidden_layers": want 1..4096, got -4`},
		{"estimate negative layers", []string{"estimate", "--model", negLayers, "--analytic"}, 1, `"num_hidden_layers": want 1..4096, got -4`},
		{"search negative layers", []string{"search", "--model", negLayers, "--gpu", "h100-sxm", "--engine", "vllm", "--isl", "10", "--osl", "10",
			"--max-params", "1B", "--out", out("s1")}, 1, `"num_hidden_layers": want 1..4096, got -4`},
		{"inspect negative positions", []string{"inspect", "--model", negPositions}, 1, `"max_position_embeddings": want 0..`},
		{"generate max-tokens", []string{"generate", "--model", "parent", "--ids", "1,2", "--max-tokens", huge}, 2, "-max-tokens"},
		{"generate max-tokens at its bound", []string{"generate", "--model", "parent", "--ids", "1,2", "--max-tokens", "67108864"}, 2, "needs 67108866 tokens"},
		{"search concurrency", []string{"search", "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "h100-sxm", "--engine", "vllm", "--isl", "10", "--osl", "10",
			"--concurrency", huge, "--max-params", "1B", "--out", out("s2")}, 2, "-concurrency"},
		{"bench-serve max-num-seqs", []string{"bench-serve", "--model", "parent", "--isl", "8", "--osl", "8", "--max-num-seqs", huge}, 2, "-max-num-seqs"},
		{"train steps", []string{"train", "--steps", huge}, 2, "-steps"},
		{"distill tokens", []string{"distill", "--tokens", huge}, 2, "-tokens"},
		{"batch rows", []string{"estimate", "--scenarios", csvIn, "--out", out("o.csv")}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := estRunCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
			}
		})
	}
	// The batch rows each carry the workload's refusal.
	b, err := os.ReadFile(out("o.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a,false", "concurrency: 9223372036854775807 clients, more than the 65536 allowed", "b,false", "input length: length must be a whole number of tokens from 1 to 67108864"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("batch output lacks %q:\n%s", want, b)
		}
	}
}

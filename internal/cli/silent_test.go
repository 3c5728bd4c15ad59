package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSilentAcceptanceRefused (issue 17, class 7): input the commands used
// to accept while ignoring part of it is refused, naming the line and what
// was meant: the batch CSV's misspelled and unknown columns and its
// unterminated quote (exit 1, no output written), a short row (its own
// error naming its line, the others priced), and a --gpu-file key no
// device has.
func TestSilentAcceptanceRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const head = "id,model,gpu,engine,isl,osl,concurrency"
	const row = "a,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,8192,256,64"
	gpuFile := write("gpus.yaml", "name: lab-card\nmemory_gib: 48\nbandwith_gbs: 960\nbf16_tflops: 200\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"misspelled columns", []string{"estimate", "--scenarios", write("mis.csv", head+",max_num_seq,kv_type\n"+row+",8,fp8\n")},
			`line 1 (the header): unknown column "max_num_seq" (did you mean "max_num_seqs"?); unknown column "kv_type" (did you mean "kv_dtype"?)`},
		{"unknown column", []string{"estimate", "--scenarios", write("extra.csv", head+",owner\n"+row+",me\n")}, `unknown column "owner"`},
		{"unterminated quote", []string{"estimate", "--scenarios", write("quote.csv", head+"\n"+row+"\nb,\"meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,8192,256,64\n")},
			"not a valid CSV file: parse error on line 3"},
		{"gpu-file estimate", []string{"estimate", "--gpu-file", gpuFile, "--gpu", "lab-card", "--analytic"},
			`gpus.yaml:3: unknown key "bandwith_gbs" (did you mean "bandwidth_gbs"?)`},
		{"gpu-file search", []string{"search", "--gpu-file", gpuFile, "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "lab-card", "--engine", "vllm",
			"--max-params", "3B", "--out", filepath.Join(dir, "s")}, `gpus.yaml:3: unknown key "bandwith_gbs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".out.csv")
			args := tc.args
			if args[1] == "--scenarios" {
				args = append(args, "--out", out)
			}
			code, _, errs := estRunCLI(t, args...)
			if code != 1 || !strings.Contains(errs, tc.want) {
				t.Errorf("%v: exit %d, %q; want 1 and %q", args, code, errs, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused batch wrote %s (%v)", out, err)
			}
		})
	}
	// A short row is named by its line; the rows around it are priced.
	out := filepath.Join(dir, "short.out.csv")
	in := write("short.csv", head+"\n"+row+"\nb,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,8192\n"+strings.Replace(row, "a,", "c,", 1)+"\n")
	if code, _, errs := estRunCLI(t, "estimate", "--scenarios", in, "--out", out); code != 0 {
		t.Fatalf("short row: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "a,true") || !strings.Contains(lines[2], "b,false") ||
		!strings.Contains(lines[2], "line 3: 5 fields, but the header has 7 columns") || !strings.HasPrefix(lines[3], "c,true") {
		t.Errorf("short row output:\n%s", b)
	}
}

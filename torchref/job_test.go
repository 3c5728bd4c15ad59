package torchref

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// The tests write job directories by hand, in the layout of
// job/CONTRACT.md, so that they do not depend on the job package.

// testJob is a job directory being assembled.
type testJob struct {
	t        testing.TB
	dir      string
	contract map[string]any
}

func newJob(t testing.TB, kind string, world int, recipe map[string]any) *testJob {
	t.Helper()
	j := &testJob{t: t, dir: t.TempDir(), contract: map[string]any{
		"version": 3, "kind": kind, "engine": "torch", "world_size": world, "recipe": recipe,
		"checkpoint_every": 10,
		"data": map[string]any{"format": "nanogpt-bin", "dtype": "uint16", "seq_len": recipe["seq_len"],
			"sha256": map[string]string{}},
		"outputs": map[string]any{"progress": "progress.jsonl", "result": "result.json", "checkpoint": "out", "resume": "resume"},
	}}
	return j
}

// model copies checkpoint directory src into the job as key ("teacher",
// "student" or "model") with the sha256 of each file.
func (j *testJob) model(key, src string) {
	j.t.Helper()
	dst := filepath.Join(j.dir, key)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		j.t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		j.t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		copyFile(j.t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		sums[e.Name()] = contractHash(j.t, dst, e.Name())
	}
	j.contract[key] = map[string]any{"path": key, "sha256": sums, "shape": shape(j.t, dst)}
}

// rows writes rows (each seq_len+1 tokens) as one shard of split ("train"
// or "valid"), in the order given.
func (j *testJob) rows(split string, rows [][]int32) {
	j.t.Helper()
	var flat []int32
	for _, r := range rows {
		flat = append(flat, r...)
	}
	rel := "data/" + split + "_000.bin"
	p := filepath.Join(j.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		j.t.Fatal(err)
	}
	writeShard(j.t, p, flat)
	d := j.contract["data"].(map[string]any)
	d[split] = []string{rel}
	d[split+"_rows"] = len(rows)
	d["sha256"].(map[string]string)[rel] = contractHash(j.t, j.dir, rel)
}

// write writes contract.json and the trainer, and returns the contract's
// path and the trainer's entry point.
func (j *testJob) write() (contract, entry string) {
	j.t.Helper()
	b, err := json.MarshalIndent(j.contract, "", " ")
	if err != nil {
		j.t.Fatal(err)
	}
	contract = filepath.Join(j.dir, "contract.json")
	if err := os.WriteFile(contract, b, 0o644); err != nil {
		j.t.Fatal(err)
	}
	if err := Write(j.dir); err != nil {
		j.t.Fatal(err)
	}
	return contract, filepath.Join(j.dir, filepath.FromSlash(Entry))
}

// result reads the job's result.json.
func (j *testJob) result() map[string]any {
	j.t.Helper()
	b, err := os.ReadFile(filepath.Join(j.dir, "result.json"))
	if err != nil {
		j.t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		j.t.Fatal(err)
	}
	return r
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// contractHash is the contract's hash of root/name: checkpoint.HashFiles
// over that one file.
func contractHash(t testing.TB, root, name string) string {
	t.Helper()
	h, err := checkpoint.HashFiles(os.DirFS(root), []string{name})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// shape is the contract's shape record of a checkpoint (job.ShapeOf's).
func shape(t testing.TB, dir string) map[string]any {
	t.Helper()
	a, err := architecture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	format := "native"
	if a.Arch == architecture.DeciLM {
		format = "decilm"
	}
	var layers []map[string]any
	for _, l := range a.Layers {
		var att, mlp any
		if x := l.Attention; x != nil {
			att = map[string]int{"heads": x.Heads, "kv_heads": x.KVHeads, "head_dim": x.HeadDim}
		}
		if x := l.MLP; x != nil {
			mlp = map[string]int{"width": x.Width}
		}
		ls := map[string]any{"attention": att, "mlp": mlp}
		if x := l.Mamba; x != nil {
			ls["mamba"] = map[string]int{"heads": x.Heads, "head_dim": x.HeadDim, "state": x.StateSize, "groups": x.Groups, "conv": x.ConvKernel}
		}
		if x := l.MoE; x != nil {
			// Qwen3-MoE and Mixtral route softmax, then top-k;
			// gpt-oss top-k, then softmax; Nemotron-H sigmoid with its group limit and scaling
			// (NemotronHConfig's defaults 1, 1, 1.0).
			moe := map[string]any{"experts": x.Experts, "top_k": x.TopK, "width": x.ExpertWidth,
				"router": "softmax_topk", "norm_topk_prob": a.MoERouter().Renormalize}
			if a.MoERouter().TopKFirst {
				moe["router"] = "topk_softmax" // gpt-oss
			}
			if x.RouterCorrection {
				moe["router"] = "sigmoid_corrected"
				moe["n_group"], moe["topk_group"], moe["routed_scaling_factor"] = rawOr(a.Raw, "n_group", 1), rawOr(a.Raw, "topk_group", 1), rawOr(a.Raw, "routed_scaling_factor", 1)
			}
			if x.SharedWidth > 0 {
				moe["shared_width"] = x.SharedWidth
			}
			ls["moe"] = moe
		}
		layers = append(layers, ls)
	}
	return map[string]any{"arch": a.Arch, "format": format, "vocab": a.Vocab, "hidden": a.Hidden,
		"tied": a.TiedEmbeddings, "layers": layers}
}

// rawOr is config value key of raw as a float64, def when absent.
func rawOr(raw map[string]any, key string, def float64) float64 {
	if n, ok := raw[key].(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return def
}

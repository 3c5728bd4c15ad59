package torchref

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
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
		"version": 1, "kind": kind, "engine": "torch", "world_size": world, "recipe": recipe,
		"checkpoint_every": 10,
		"data":             map[string]any{"format": "nanogpt-bin-v1", "dtype": "uint16", "sha256": map[string]string{}},
		"outputs":          map[string]any{"progress": "progress.jsonl", "result": "result.json", "checkpoint": "out"},
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
		sums[e.Name()] = copyHash(j.t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
	j.contract[key] = map[string]any{"path": key, "sha256": sums}
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
	d["sha256"].(map[string]string)[rel] = fileHash(j.t, p)
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

func copyHash(t testing.TB, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileHash(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

package job

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validContract is the contract of an emitted torch distill job.
func validContract(t *testing.T) (*Contract, []byte) {
	t.Helper()
	e := emit(t, distillConfig(t, "torch", child(t, "native")))
	return e.Contract, readFile(t, e.Dir+"/"+ContractFile)
}

// TestContractRoundTrip: the written contract parses back to the same
// value and marshals to the same bytes.
func TestContractRoundTrip(t *testing.T) {
	c, b := validContract(t)
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(b) {
		t.Errorf("contract changed on a round trip:\n%s\nvs\n%s", again, b)
	}
	if got.Recipe != c.Recipe || got.Data.TrainRows != c.Recipe.Steps*c.Recipe.Batch {
		t.Errorf("recipe %+v, data %+v", got.Recipe, got.Data)
	}
}

// TestContractValidate: each broken field is refused, naming the field
// and saying what would be valid.
func TestContractValidate(t *testing.T) {
	_, b := validContract(t)
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		field string
		says  string
	}{
		{"version", func(m map[string]any) { m["version"] = 1 }, "version", "reads version 3"},
		{"kind", func(m map[string]any) { m["kind"] = "train" }, "kind", "distill, importance, eval, proxy"},
		{"engine", func(m map[string]any) { m["engine"] = "native" }, "engine", "automodel, megatron-bridge, torch"},
		{"no teacher", func(m map[string]any) { delete(m, "teacher") }, "teacher", "takes a teacher and a student"},
		{"model too", func(m map[string]any) { m["model"] = m["student"] }, "teacher", "no model"},
		{"world", func(m map[string]any) { m["world_size"] = 0 }, "world_size", "1 to 65536"},
		{"batch", func(m map[string]any) { m["world_size"] = 3 }, "recipe.batch", "not a multiple of world_size 3"},
		{"micro", func(m map[string]any) { sub(m, "recipe")["micro_batch"] = 4 }, "recipe.micro_batch", "batch / world_size = 2"},
		{"steps", func(m map[string]any) { sub(m, "recipe")["steps"] = 5 }, "recipe.steps", "ceil(tokens / (batch × seq_len)) = 4"},
		{"rows", func(m map[string]any) { sub(m, "data")["train_rows"] = 3 }, "data.train_rows", "steps × batch = 16"},
		{"seq", func(m map[string]any) { sub(m, "recipe")["seq_len"] = 64 }, "recipe.seq_len", "differs from data.seq_len 32"},
		{"lr", func(m map[string]any) { sub(m, "recipe")["min_lr"] = 1.0 }, "recipe.lr", "min_lr <= lr"},
		{"schedule", func(m map[string]any) { sub(m, "recipe")["schedule"] = "linear" }, "recipe.schedule", "want cosine"},
		{"weights", func(m map[string]any) { r := sub(m, "recipe"); r["kd_weight"], r["ce_weight"] = 0, 0 }, "recipe.kd_weight", "not both 0"},
		{"format", func(m map[string]any) { sub(m, "data")["format"] = "jsonl" }, "data.format", "nanogpt-bin or megatron-indexed"},
		{"dtype", func(m map[string]any) { sub(m, "data")["dtype"] = "int8" }, "data.dtype", "uint16 or uint32"},
		{"shard hash", func(m map[string]any) { sub(m, "data")["sha256"] = map[string]any{} }, "data.sha256", "no hash"},
		{"escape", func(m map[string]any) { sub(m, "student")["path"] = "../x" }, "student.path", "inside the job directory"},
		{"bad hash", func(m map[string]any) { sub(m, "tokenizer")["sha256"] = map[string]any{"tokenizer.json": "xyz"} }, "tokenizer.sha256", "not 64 hex digits"},
		{"no config", func(m map[string]any) { delete(sub(sub(m, "student"), "sha256"), "config.json") }, "student.sha256", "no config.json"},
		{"native per-layer", func(m map[string]any) {
			ls := sub(sub(m, "student"), "shape")["layers"].([]any)
			ls[0].(map[string]any)["mlp"] = map[string]any{"width": 7}
		}, "student.shape.format", "a per-layer shape is decilm"},
		{"heads", func(m map[string]any) {
			for _, l := range sub(sub(m, "student"), "shape")["layers"].([]any) {
				if a, ok := l.(map[string]any)["attention"].(map[string]any); ok {
					a["kv_heads"] = 3
				}
			}
		}, "student.shape.layers[0].attention", "heads a multiple of kv_heads"},
		{"vocab", func(m map[string]any) { sub(sub(m, "student"), "shape")["vocab"] = 100 }, "student.shape.vocab", "share one tokenizer"},
		{"checkpoint out", func(m map[string]any) { sub(m, "outputs")["checkpoint"] = "" }, "outputs.checkpoint", "relative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tc.edit(m)
			nb, _ := json.Marshal(m)
			_, err := Parse(nb)
			var ce *ContractError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ContractError", err)
			}
			if ce.Field != tc.field || !strings.Contains(ce.Msg, tc.says) {
				t.Errorf("got %q (field %s), want field %s saying %q", err, ce.Field, tc.field, tc.says)
			}
		})
	}
	if _, err := Parse(append([]byte(`{"version": 3, "surprise": 1,`), b[1:]...)); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("an unknown field: %v", err)
	}
}

func sub(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }

// FuzzParse: any bytes parse to a valid contract that marshals and parses
// back the same, or are refused; never a panic.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "golden", "torch", ContractFile)); err == nil {
		f.Add(b) // a valid contract, for the fuzzer to mutate
	}
	f.Add([]byte(`{"version": 3, "kind": "eval"}`))
	f.Add([]byte(`{"version": 3, "kind": "distill", "engine": "torch", "world_size": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse(out)
		if err != nil {
			t.Fatalf("a valid contract does not parse back: %v", err)
		}
		out2, _ := c2.Marshal()
		if string(out) != string(out2) {
			t.Fatal("marshal is not stable")
		}
	})
}

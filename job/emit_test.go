package job

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/train"
)

// golden compares the emitted job's text files and its file listing
// (names and sizes; the trainer's files by name only, package torchref
// owns them) with testdata/golden/NAME (rewritten with -update).
func golden(t *testing.T, name, dir string) {
	t.Helper()
	var listing strings.Builder
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		info, _ := d.Info()
		if strings.HasPrefix(rel, "trainer/") {
			if rel == "trainer/autocompress_torch.py" {
				fmt.Fprintf(&listing, "%s\n", rel)
			}
			return nil
		}
		fmt.Fprintf(&listing, "%s %d\n", rel, info.Size())
		if (strings.HasSuffix(rel, ".sh") || strings.HasSuffix(rel, ".sbatch")) && info.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s is not executable", rel)
		}
		switch {
		case rel == ContractFile, strings.HasSuffix(rel, ".sh"), strings.HasSuffix(rel, ".sbatch"),
			strings.HasSuffix(rel, ".yaml"), strings.HasSuffix(rel, ".txt"), strings.HasPrefix(rel, "glue/"):
			got[rel] = readFile(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got["files.txt"] = []byte(listing.String())
	gdir := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.RemoveAll(gdir); err != nil {
			t.Fatal(err)
		}
		for rel, b := range got {
			p := filepath.Join(gdir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for rel, b := range got {
		want, err := os.ReadFile(filepath.Join(gdir, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("%s: %v (run go test ./job -run %s -update)", rel, err, t.Name())
			continue
		}
		if string(want) != string(b) {
			t.Errorf("%s differs from testdata/golden/%s/%s (go test ./job -update after checking the change):\n%s", rel, name, rel, b)
		}
	}
	filepath.WalkDir(gdir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(gdir, p)
			if _, ok := got[filepath.ToSlash(rel)]; !ok {
				t.Errorf("golden %s was not emitted", rel)
			}
		}
		return nil
	})
}

// TestEmitGolden: the job directory of each engine, byte for byte.
func TestEmitGolden(t *testing.T) {
	native, deci := child(t, "native"), child(t, "decilm")
	for _, tc := range []struct {
		name string
		c    EmitConfig
	}{
		{"torch", distillConfig(t, "torch", native)},
		{"automodel", distillConfig(t, "automodel", deci)},
		{"megatron-bridge", func() EmitConfig {
			c := distillConfig(t, "megatron-bridge", native)
			c.Slurm = SlurmResources{Nodes: 2, GPUsPerNode: 1, Partition: "batch", Account: "llm", Time: "01:00:00"}
			return c
		}()},
		{"torch-eval", EmitConfig{Kind: Eval, Engine: "torch", Dir: filepath.Join(t.TempDir(), "job"), Model: deci,
			Data: []string{"parent:test"}, Recipe: Recipe{SeqLen: 32, Batch: 4}, Rows: 6, WorldSize: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := emit(t, tc.c)
			if e.Existing {
				t.Fatal("a fresh directory was found existing")
			}
			if err := Verify(e.Dir, e.Contract); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, e.Dir)
		})
	}
}

// TestEmitDataInStepOrder: the train shard holds native distill's rows in
// the order native train's steps take them, and the valid shard its
// held-out rows.
func TestEmitDataInStepOrder(t *testing.T) {
	c := distillConfig(t, "torch", child(t, "native"))
	e := emit(t, c)
	dc := distill.Config{Teacher: c.Teacher, Student: c.Student, Data: c.Data, EvalData: c.EvalData, Assets: "."}
	dc.Train = train.Options{SeqLen: 32, Batch: 4, EvalRows: 8}
	rows, evalRows, err := distill.Data(context.Background(), dc)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]int32
	for _, i := range train.RowOrder(len(rows), c.Recipe.Seed, 16) {
		want = append(want, rows[i])
	}
	got, err := ReadShardFile(filepath.Join(e.Dir, "data", "train_000.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, flat(want)) {
		t.Error("the train shard is not native distill's rows in step order")
	}
	v, err := ReadShardFile(filepath.Join(e.Dir, "data", "valid_000.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v, flat(evalRows)) || len(evalRows) != 8 {
		t.Errorf("the valid shard holds %d tokens, want the %d held-out rows", len(v), len(evalRows))
	}
}

// TestEmitRefuses: bad requests are refused before any file is written,
// each saying what to change.
func TestEmitRefuses(t *testing.T) {
	native, deci := child(t, "native"), child(t, "decilm")
	cases := []struct {
		name string
		edit func(c *EmitConfig)
		says string
	}{
		{"batch", func(c *EmitConfig) { c.WorldSize = 3 }, "does not divide among 3 ranks: choose a multiple of 3 (e.g. 6)"},
		{"per-layer megatron", func(c *EmitConfig) { c.Engine, c.Student = "megatron-bridge", deci }, "Puzzletron AnyModel"},
		{"automodel top-k", func(c *EmitConfig) { c.Engine, c.Recipe.TopK = "automodel", 8 }, "no top-k"},
		{"megatron temperature", func(c *EmitConfig) { c.Engine, c.Recipe.Temperature = "megatron-bridge", 2 }, "takes no temperature"},
		{"automodel eval", func(c *EmitConfig) { c.Engine, c.Kind, c.Model = "automodel", Eval, native }, "choose engine torch"},
		{"native", func(c *EmitConfig) { c.Engine = "native" }, "native runs in this binary"},
		{"no tokens", func(c *EmitConfig) { c.Recipe.Tokens = 0 }, "positive number of training tokens"},
		{"missing student", func(c *EmitConfig) { c.Student = filepath.Join(t.TempDir(), "nothing") }, "student"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := distillConfig(t, "torch", native)
			tc.edit(&c)
			_, err := Emit(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
			if _, serr := os.Stat(c.Dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s was written before the refusal", c.Dir)
			}
		})
	}
}

// TestEmitAgain: the same request finds its job (to resume it); another
// request over it is an *output.ExistsError unless forced.
func TestEmitAgain(t *testing.T) {
	c := distillConfig(t, "torch", child(t, "native"))
	emit(t, c)
	again := emit(t, c)
	if !again.Existing {
		t.Error("the same request wrote the job again")
	}
	c.Recipe.LR = 1e-3
	if _, err := Emit(context.Background(), c); !errors.As(err, new(*output.ExistsError)) {
		t.Fatalf("another request over the job: %v, want an *output.ExistsError", err)
	}
	c.Force = true
	if e := emit(t, c); e.Existing || e.Contract.Recipe.LR != 1e-3 {
		t.Errorf("forced: existing %v, lr %g", e.Existing, e.Contract.Recipe.LR)
	}
}

// TestVerifyHashes: a changed or missing file is a *HashError naming it.
func TestVerifyHashes(t *testing.T) {
	e := emit(t, distillConfig(t, "torch", child(t, "native")))
	p := filepath.Join(e.Dir, "student", "config.json")
	b := readFile(t, p)
	if err := os.Remove(p); err != nil { // a hard link: replace, do not write through
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	var he *HashError
	if err := Verify(e.Dir, e.Contract); !errors.As(err, &he) || he.Path != "student/config.json" || !strings.Contains(err.Error(), "emit the job again") {
		t.Errorf("changed file: %v", err)
	}
	os.Remove(filepath.Join(e.Dir, "data", "valid_000.bin"))
	os.WriteFile(p, b, 0o644)
	if err := Verify(e.Dir, e.Contract); !errors.As(err, &he) || he.Path != "data/valid_000.bin" || !strings.Contains(he.Msg, "missing") {
		t.Errorf("missing file: %v", err)
	}
}

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/internal/output"
)

// TestInitEqualsNewSaved: Init writes, byte for byte, what New with the same
// seed saves, in each dtype.
func TestInitEqualsNewSaved(t *testing.T) {
	for _, arch := range []*architecture.Model{uniformArch(), qwenArch("Qwen3ForCausalLM", "qwen3"), parentShapedArch(func(int) bool { return true })} {
		for _, dt := range []checkpoint.DType{checkpoint.BF16, checkpoint.F16, checkpoint.F32} {
			m, err := New(arch, 42)
			if err != nil {
				t.Fatal(err)
			}
			base := t.TempDir()
			want, got := filepath.Join(base, "saved"), filepath.Join(base, "init")
			if err := m.Save(want, dt); err != nil {
				t.Fatal(err)
			}
			if err := Init(context.Background(), arch, got, InitOptions{Seed: 42, DType: dt}); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"config.json", checkpoint.SingleFileName} {
				a, _ := os.ReadFile(filepath.Join(want, f))
				b, err := os.ReadFile(filepath.Join(got, f))
				if err != nil {
					t.Fatal(err)
				}
				if len(a) == 0 || string(a) != string(b) {
					t.Fatalf("%s %s: Init's %s (%d bytes) differs from New's saved one (%d bytes)", arch.Arch, dt, f, len(b), len(a))
				}
			}
		}
	}
}

// TestInitBoundedMemory: Init never holds the model: it allocates far less
// than the checkpoint it writes.
func TestInitBoundedMemory(t *testing.T) {
	arch := parentShapedArch(func(int) bool { return true }) // ~4.5M parameters
	dir := filepath.Join(t.TempDir(), "m")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := Init(context.Background(), arch, dir, InitOptions{Seed: 1, DType: checkpoint.F32}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	st, err := os.Stat(filepath.Join(dir, checkpoint.SingleFileName))
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(st.Size())/4 {
		t.Fatalf("Init allocated %d bytes writing a %d-byte checkpoint: it holds the model", alloc, st.Size())
	}
}

// TestInitRefuses: an existing directory (without Force), an architecture
// the engine cannot run and a cancelled context leave nothing written.
func TestInitRefuses(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "m")
	if err := Init(ctx, uniformArch(), dir, InitOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, checkpoint.SingleFileName))
	err := Init(ctx, uniformArch(), dir, InitOptions{Seed: 2})
	if !errors.As(err, new(*output.ExistsError)) {
		t.Fatalf("Init over an existing directory = %v, want *output.ExistsError", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, checkpoint.SingleFileName)); string(after) != string(before) {
		t.Fatal("a refused Init changed the existing checkpoint")
	}
	if err := Init(ctx, uniformArch(), dir, InitOptions{Seed: 2, Force: true}); err != nil {
		t.Fatalf("Init with Force: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, checkpoint.SingleFileName)); string(after) == string(before) {
		t.Fatal("Init with Force and another seed left the old weights")
	}

	// A MoE layer the engine does not run: a shared expert.
	moe := moeArch(architecture.Qwen3MoE, "qwen3_moe", 4, 2, nil)
	moe.Layers[1].MoE.SharedWidth = 8
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		arch *architecture.Model
		dt   checkpoint.DType
	}{{"moe", ctx, moe, ""}, {"cancelled", cancelled, uniformArch(), ""}, {"int dtype", ctx, uniformArch(), checkpoint.I32}} {
		out := filepath.Join(base, c.name)
		err := Init(c.ctx, c.arch, out, InitOptions{DType: c.dt})
		if err == nil {
			t.Fatalf("%s: Init succeeded", c.name)
		}
		if c.name == "moe" && !errors.As(err, new(*UnsupportedError)) {
			t.Fatalf("moe: %v, want *UnsupportedError", err)
		}
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.Name() != "m" {
				t.Fatalf("%s: Init (%v) left %s behind", c.name, err, e.Name())
			}
		}
	}
}

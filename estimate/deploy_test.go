package estimate_test

import (
	"errors"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

func mustPreset(t *testing.T, name string) *architecture.Model {
	t.Helper()
	m, err := architecture.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustGPU(t *testing.T, name string) *hardware.GPU {
	t.Helper()
	g, err := hardware.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTPRule: a TP degree the shape cannot split (32 heads / 8 KV heads
// over 3) is refused by Estimate and Memory for the engines that shard
// layers, with the valid degrees; llama.cpp (layer split) is not.
func TestTPRule(t *testing.T) {
	m := mustPreset(t, "meta-llama/Meta-Llama-3.1-8B")
	h100 := mustGPU(t, "h100-sxm")
	w := workload.Workload{Input: workload.FixedLength(512), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	for _, eng := range []estimate.Engine{estimate.VLLM, estimate.SGLang, estimate.TRTLLM} {
		_, err := estimate.Estimate(m, h100, eng, estimate.Options{TP: 3}, &w)
		var te *architecture.TPError
		if !errors.As(err, &te) || len(te.Valid) != 4 || te.Valid[3] != 8 {
			t.Errorf("%s TP 3: %v; want a *TPError listing 1, 2, 4, 8", eng, err)
		}
		if _, err := estimate.Memory(m, h100, eng, estimate.Options{TP: 3, MaxModelLen: 4096}); !errors.As(err, &te) {
			t.Errorf("%s Memory TP 3: %v", eng, err)
		}
		for _, tp := range []int{1, 2, 4, 8} {
			if _, err := estimate.Estimate(m, h100, eng, estimate.Options{TP: tp}, &w); err != nil {
				t.Errorf("%s TP %d: %v", eng, tp, err)
			}
		}
	}
}

// TestFitTP: the advice names the smallest TP that fits, within the
// node's GPUs and the shape's valid degrees.
func TestFitTP(t *testing.T) {
	w := workload.Workload{Input: workload.FixedLength(1024), Output: workload.FixedLength(128), Concurrency: 1, Seed: 1}
	m70 := mustPreset(t, "meta-llama/Meta-Llama-3.1-70B")
	h100 := mustGPU(t, "h100-sxm")
	_, err := estimate.Estimate(m70, h100, estimate.VLLM, estimate.Options{}, &w)
	var fe *estimate.FitError
	if !errors.As(err, &fe) || fe.FitsAtTP != 2 || fe.MaxTP != 8 {
		t.Fatalf("70B bf16 on one H100: %v (%+v); want it to fit at TP 2 of 8", err, fe)
	}
	if _, err := estimate.Estimate(m70, h100, estimate.VLLM, estimate.Options{TP: fe.FitsAtTP}, &w); err != nil {
		t.Errorf("advised TP %d: %v", fe.FitsAtTP, err)
	}
	// Two RTX 4090s cannot hold 70B in bf16 at any TP: no TP advice.
	g := mustGPU(t, "rtx-4090")
	_, err = estimate.Estimate(m70, g, estimate.VLLM, estimate.Options{GPUs: 2}, &w)
	if !errors.As(err, &fe) || fe.FitsAtTP != 0 || fe.MaxTP != 2 {
		t.Errorf("70B on 2 × 4090: %v; want no TP advice within 2 GPUs", err)
	}
	var ue *estimate.UnsupportedError
	if _, err := estimate.Estimate(m70, g, estimate.VLLM, estimate.Options{TP: 4, GPUs: 2}, &w); !errors.As(err, &ue) {
		t.Errorf("TP 4 on a 2-GPU node: %v; want an *UnsupportedError", err)
	}
}

// TestImpossibleDeployments: engines on devices they do not run on, and
// precisions an engine has no kernels for on a GPU or a model has no
// tensors for, are refused with the option at fault and what is valid.
func TestImpossibleDeployments(t *testing.T) {
	dense := mustPreset(t, "meta-llama/Meta-Llama-3.1-8B")
	moe := mustPreset(t, "openai/gpt-oss-20b")
	w := workload.Workload{Input: workload.FixedLength(512), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	for _, tc := range []struct {
		m         *architecture.Model
		gpu       string
		eng       estimate.Engine
		prec      string
		flag      string
		valid     string // one entry Valid must hold ("" when it must fit)
		forbidden string // one entry it must not hold
	}{
		{dense, "apple-m3-max", estimate.VLLM, "", "engine", "llamacpp", "vllm"},
		{dense, "h100-sxm", estimate.Native, "", "engine", "vllm", "native"},
		{dense, "cpu-local", estimate.TRTLLM, "", "engine", "native", "trtllm"},
		{dense, "h100-sxm", estimate.VLLM, "mxfp4", "precision", "nvfp4", "mxfp4"},
		{dense, "a100-80gb", estimate.TRTLLM, "fp8", "precision", "int4-awq", "fp8"},
		{dense, "h100-sxm", estimate.TRTLLM, "nvfp4", "precision", "fp8", "nvfp4"},
		{dense, "h100-sxm", estimate.VLLM, "q4_k_m", "precision", "bf16", "q4_k_m"},
		{dense, "rtx-4090", estimate.LlamaCPP, "fp8", "precision", "q4_k_m", "fp8"},
		// Real deployments pass.
		{moe, "h100-sxm", estimate.VLLM, "mxfp4", "", "", ""},
		{dense, "b200", estimate.TRTLLM, "nvfp4", "", "", ""},
		{dense, "a100-80gb", estimate.VLLM, "fp8", "", "", ""},
		{dense, "apple-m3-max", estimate.LlamaCPP, "q4_0", "", "", ""},
		{dense, "cpu-local", estimate.LlamaCPP, "q4_0", "", "", ""},
	} {
		_, err := estimate.Estimate(tc.m, mustGPU(t, tc.gpu), tc.eng, estimate.Options{Precision: tc.prec}, &w)
		name := tc.m.Name + " " + tc.gpu + " " + string(tc.eng) + " " + tc.prec
		if tc.flag == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		var ue *estimate.UnsupportedError
		if !errors.As(err, &ue) || ue.Flag != tc.flag {
			t.Errorf("%s: %v; want an *UnsupportedError for %s", name, err, tc.flag)
			continue
		}
		has := map[string]bool{}
		for _, v := range ue.Valid {
			has[v] = true
		}
		if !has[tc.valid] || has[tc.forbidden] {
			t.Errorf("%s: valid %v; want %s in it and not %s", name, ue.Valid, tc.valid, tc.forbidden)
		}
	}
}

// TestOptionsOutOfRange: negative counts and a memory fraction outside
// (0, 1] are refused naming the option, never replaced by the defaults.
func TestOptionsOutOfRange(t *testing.T) {
	m := mustPreset(t, "meta-llama/Meta-Llama-3.1-8B")
	w := workload.Workload{Input: workload.FixedLength(512), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	for _, tc := range []struct {
		o    estimate.Options
		flag string
	}{
		{estimate.Options{MemFraction: -0.2}, "mem-fraction"},
		{estimate.Options{MemFraction: 1.5}, "mem-fraction"},
		{estimate.Options{MaxNumSeqs: -3}, "max-num-seqs"},
		{estimate.Options{MaxBatchedTokens: -1}, "max-batched-tokens"},
		{estimate.Options{TP: -2}, "tp"},
		{estimate.Options{GPUs: -1}, "gpus"},
		{estimate.Options{MaxModelLen: -5}, "context"},
	} {
		_, err := estimate.Estimate(m, mustGPU(t, "h100-sxm"), estimate.VLLM, tc.o, &w)
		var ue *estimate.UnsupportedError
		if !errors.As(err, &ue) || ue.Flag != tc.flag {
			t.Errorf("%+v: %v; want an *UnsupportedError for %s", tc.o, err, tc.flag)
		}
	}
}

// TestLlamaCPPCapacityAgrees: llama.cpp's KV capacity and its concurrency
// describe the same allocation: the slots running at once each hold their
// padded context inside the capacity (768 tokens and 1,372 at a
// 640-token context disagreed).
func TestLlamaCPPCapacityAgrees(t *testing.T) {
	m := mustPreset(t, "Qwen/Qwen3-0.6B")
	for _, slots := range []int{1, 3, 8} {
		w := workload.FixedClosed(512, 128, slots)
		r, err := estimate.Estimate(m, mustGPU(t, "rtx-4090"), estimate.LlamaCPP, estimate.Options{Precision: "q8_0"}, &w)
		if err != nil {
			t.Fatal(err)
		}
		mem := r.Memory
		perSlot := 768.0 // 640 tokens padded to 256 cells
		if mem.MaxConcurrency != slots || float64(mem.MaxConcurrency)*perSlot != mem.KVCapacityTokens || mem.MaxSlots < slots {
			t.Errorf("%d slots: concurrency %d, capacity %.0f tokens, memory for %d slots; want %d × %.0f = capacity",
				slots, mem.MaxConcurrency, mem.KVCapacityTokens, mem.MaxSlots, slots, perSlot)
		}
	}
}

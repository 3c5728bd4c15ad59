package prune

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
)

var (
	benchFlag   = flag.Bool("prune.bench", false, "run TestPruneSpeed: prune a synthetic ~2.3 GB sharded bf16 checkpoint and compare with cp -r")
	benchLayers = flag.Int("prune.bench.layers", 16, "decoder layers of the TestPruneSpeed model (16 ≈ 2.3 GB)")
	benchRounds = flag.Int("prune.bench.rounds", 5, "interleaved measurement rounds of TestPruneSpeed")
	benchDir    = flag.String("prune.bench.dir", "", "keep TestPruneSpeed's files in this directory and reuse a parent generated there before")
)

// Environment of the prune subprocess started by TestPruneSpeed.
const (
	envSubModel = "AUTOCOMPRESS_PRUNE_SUB_MODEL"
	envSubPlan  = "AUTOCOMPRESS_PRUNE_SUB_PLAN"
	envSubOut   = "AUTOCOMPRESS_PRUNE_SUB_OUT"
)

// TestPruneSubprocess is the body of the measured prune run; it does
// nothing unless TestPruneSpeed started it.
func TestPruneSubprocess(t *testing.T) {
	model := os.Getenv(envSubModel)
	if model == "" {
		t.Skip("helper for TestPruneSpeed")
	}
	plan, err := LoadPlan(os.Getenv(envSubPlan))
	must(t, err)
	if _, err := Prune(context.Background(), Options{Model: model, Plan: plan, Out: os.Getenv(envSubOut), Force: true, Engine: "vllm"}); err != nil {
		t.Fatal(err)
	}
	// Peak RSS of this process (VmHWM is per address space, reset by exec;
	// rusage's ru_maxrss would include the parent's size at fork).
	status, err := os.ReadFile("/proc/self/status")
	must(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Printf("VMHWM %s\n", strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
		}
	}
}

// TestPruneSpeed (go test ./prune -run TestPruneSpeed -prune.bench -v)
// writes a synthetic Llama-shaped checkpoint of ~2.3 GB in bf16, 4 shards,
// then, with the page cache warm, times in one run: cp -r, cp -r followed by
// sync (the writer fsyncs every shard), an identity prune and a real prune
// (hidden 2048→1792, FFN 8192→6144, one layer dropped), each prune in a
// subprocess that reports its peak RSS (VmHWM), in interleaved rounds. It
// prints per-round and median ratios to cp -r and to cp -r + sync (the
// writer fsyncs every shard; cp does not), and fails when the median ratio
// to cp -r + sync exceeds 1.5 or when peak RSS exceeds the largest tensor +
// 256 MiB.
func TestPruneSpeed(t *testing.T) {
	if !*benchFlag {
		t.Skip("run with -prune.bench")
	}
	cfg := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 8192,
		"num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
		"num_hidden_layers": *benchLayers, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16",
	}
	cfgBytes := configBytes(t, cfg)
	m, err := architecture.FromConfig(cfgBytes)
	must(t, err)
	var specs []checkpoint.TensorSpec
	var total, largest int64
	for _, ts := range m.Tensors() {
		s := checkpoint.TensorSpec{Name: ts.Name, DType: checkpoint.BF16, Shape: ts.Shape}
		specs = append(specs, s)
		total += s.Size()
		largest = max(largest, s.Size())
	}
	root := *benchDir
	if root == "" {
		root = t.TempDir()
	}
	parent := filepath.Join(root, fmt.Sprintf("parent-%d", *benchLayers))
	if _, err := os.Stat(filepath.Join(parent, "config.json")); err != nil {
		start := time.Now()
		must(t, testutil.Write(parent, specs, testutil.Options{Shards: 4, Files: map[string][]byte{"config.json": cfgBytes}}))
		t.Logf("generated %.2f GB in %d tensors, 4 shards, in %v", float64(total)/1e9, len(specs), time.Since(start).Round(time.Millisecond))
	}

	var hidden []int
	for i := 0; i < 2048; i++ {
		if i%8 != 7 {
			hidden = append(hidden, i)
		}
	}
	real := &Plan{Version: 1, Hidden: hidden}
	for l := 0; l < *benchLayers; l++ {
		if l == *benchLayers/2+1 {
			real.Layers = append(real.Layers, LayerPlan{Layer: l, Remove: true})
			continue
		}
		real.Layers = append(real.Layers, LayerPlan{Layer: l, Neurons: seqFrom(l*64, 6144)})
	}
	plans := map[string]string{"identity": writePlanFile(t, &Plan{Version: 1}), "prune": writePlanFile(t, real)}

	// Warm the page cache for both sides.
	copyDir := filepath.Join(root, "copy")
	var lastCPU time.Duration // user+system CPU of the last command run
	run := func(name string, args ...string) time.Duration {
		t0 := time.Now()
		cmd := exec.Command(name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		lastCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return time.Since(t0)
	}
	run("sh", "-c", "cat "+filepath.Join(parent, "*.safetensors")+" > /dev/null")
	run("cp", "-r", parent, copyDir)
	run("rm", "-rf", copyDir)
	run("sync")

	type result struct {
		cpu   time.Duration // user+system CPU of the prune process
		dur   time.Duration
		rss   int64
		bytes int64
	}
	prune := func(name string) result {
		out := filepath.Join(root, "child-"+name)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestPruneSubprocess$")
		cmd.Env = append(os.Environ(), envSubModel+"="+parent, envSubPlan+"="+plans[name], envSubOut+"="+out)
		t0 := time.Now()
		b, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			t.Fatalf("prune %s: %v\n%s", name, err, b)
		}
		var kb int64 = -1
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VMHWM ") {
				fmt.Sscanf(strings.TrimPrefix(line, "VMHWM "), "%d kB", &kb)
			}
		}
		if kb < 0 {
			t.Fatalf("prune %s: no VmHWM reported:\n%s", name, b)
		}
		r, err := checkpoint.Open(out)
		must(t, err)
		res := result{dur: d, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), rss: kb * 1024, bytes: r.TotalSize()}
		r.Close()
		run("rm", "-rf", out)
		run("sync")
		return res
	}
	// Interleaved rounds: each round times cp -r, cp -r + sync and both
	// prunes back to back, and the ratios are taken within the round (the
	// machine and its disk are shared, so the load drifts between rounds);
	// the median over rounds is reported and checked.
	var cps, cpSyncs, cpCPU []time.Duration
	results := map[string][]result{}
	for range *benchRounds {
		cps = append(cps, run("cp", "-r", parent, copyDir))
		cpCPU = append(cpCPU, lastCPU)
		run("rm", "-rf", copyDir)
		run("sync")
		t0 := time.Now()
		run("cp", "-r", parent, copyDir)
		run("sync")
		cpSyncs = append(cpSyncs, time.Since(t0))
		run("rm", "-rf", copyDir)
		run("sync")
		for _, name := range []string{"identity", "prune"} {
			results[name] = append(results[name], prune(name))
		}
	}
	median := func(v []float64) float64 {
		w := append([]float64(nil), v...)
		sort.Float64s(w)
		if len(w)%2 == 1 {
			return w[len(w)/2]
		}
		return (w[len(w)/2-1] + w[len(w)/2]) / 2
	}
	secs := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = d.Seconds()
		}
		return out
	}
	limit := largest + 256<<20
	t.Logf("parent %.2f GB in 4 shards, largest tensor %.1f MiB, RSS limit (largest + 256 MiB) %.1f MiB",
		float64(total)/1e9, float64(largest)/(1<<20), float64(limit)/(1<<20))
	t.Logf("cp -r          s per round %.2f (median %.2f s, %.2f GB/s)", secs(cps), median(secs(cps)), float64(total)/median(secs(cps))/1e9)
	t.Logf("cp -r + sync   s per round %.2f (median %.2f s)", secs(cpSyncs), median(secs(cpSyncs)))
	t.Logf("cp -r CPU      s per round %.2f (median %.2f s)", secs(cpCPU), median(secs(cpCPU)))
	summary := map[string]any{"rounds": *benchRounds, "cp_s": secs(cps), "cp_sync_s": secs(cpSyncs), "cp_cpu_s": secs(cpCPU), "limit_bytes": limit}
	for _, name := range []string{"identity", "prune"} {
		var ds []time.Duration
		var rCp, rSync, cpu []float64
		var rss int64
		for k, x := range results[name] {
			ds = append(ds, x.dur)
			cpu = append(cpu, x.cpu.Seconds())
			rCp = append(rCp, x.dur.Seconds()/cps[k].Seconds())
			rSync = append(rSync, x.dur.Seconds()/cpSyncs[k].Seconds())
			rss = max(rss, x.rss)
		}
		mCp, mSync := median(rCp), median(rSync)
		t.Logf("prune %-8s s per round %.2f, wrote %.2f GB; ÷ cp -r per round %.2f (median %.2f); ÷ (cp -r + sync) per round %.2f (median %.2f); peak RSS %.1f MiB = %.3f of the limit",
			name, secs(ds), float64(results[name][0].bytes)/1e9, rCp, mCp, rSync, mSync, float64(rss)/(1<<20), float64(rss)/float64(limit))
		t.Logf("prune %-8s CPU s per round %.2f (median %.2f = %.2f× cp -r's CPU)", name, cpu, median(cpu), median(cpu)/median(secs(cpCPU)))
		summary[name+"_cpu_s"] = cpu
		if rss > limit {
			t.Errorf("%s: peak RSS %d MiB over the limit %d MiB", name, rss>>20, limit>>20)
		}
		if mSync > 1.5 {
			t.Errorf("%s: median %.2f× cp -r + sync, target ≤ 1.5", name, mSync)
		}
		summary[name+"_s"] = secs(ds)
		summary[name+"_ratio_cp_median"] = mCp
		summary[name+"_ratio_cp_sync_median"] = mSync
		summary[name+"_peak_rss_bytes"] = rss
	}
	b, _ := json.Marshal(summary)
	fmt.Println(string(b))
}

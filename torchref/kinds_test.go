package torchref

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/train"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ranks starts world ranks of the trainer on contract, as launch.sh does
// where torchrun is broken: env:// variables set by hand, one thread each.
func ranks(t testing.TB, entry, contract string, world int) []*exec.Cmd {
	t.Helper()
	port := freePort(t)
	var cmds []*exec.Cmd
	for r := 0; r < world; r++ {
		cmd := pyCmd(entry, contract)
		cmd.Env = append(cmd.Env, "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port),
			fmt.Sprintf("RANK=%d", r), fmt.Sprintf("LOCAL_RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", world))
		cmds = append(cmds, cmd)
	}
	return cmds
}

// runRanks runs world ranks to the end and returns each one's exit code
// and their combined output.
func runRanks(t testing.TB, entry, contract string, world int) ([]int, string) {
	t.Helper()
	cmds := ranks(t, entry, contract, world)
	outs := make([]*limitedBuffer, world)
	for i, c := range cmds {
		outs[i] = &limitedBuffer{}
		c.Stdout, c.Stderr = outs[i], outs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	codes := make([]int, world)
	var all string
	for i, c := range cmds {
		c.Wait()
		codes[i] = c.ProcessState.ExitCode()
		all += fmt.Sprintf("--- rank %d (exit %d)\n%s", i, codes[i], outs[i].String())
	}
	return codes, all
}

// limitedBuffer keeps the last 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 64<<10 {
		l.b = l.b[len(l.b)-64<<10:]
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

func mustRun(t testing.TB, entry, contract string, world int) {
	t.Helper()
	codes, out := runRanks(t, entry, contract, world)
	for _, c := range codes {
		if c != 0 {
			t.Fatalf("trainer failed:\n%s", out)
		}
	}
}

func randomRows(n, T, vocab int, seed uint64) [][]int32 {
	flat := randomTokens(n*(T+1), vocab, seed)
	rows := make([][]int32, n)
	for i := range rows {
		rows[i] = flat[i*(T+1) : (i+1)*(T+1)]
	}
	return rows
}

// parentRows are n rows of T+1 consecutive tokens of the parent's own
// held-out text (parent:validation), so that losses and scores are those
// of real data.
func parentRows(t testing.TB, n, T int) [][]int32 {
	t.Helper()
	text, err := parent.SplitText("", "validation")
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.LastIndexByte(text[:min(len(text), 64<<10)], ' '); i > 0 {
		text = text[:i]
	}
	tok, err := tokenizer.Load(mustParent(t))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) < n*(T+1) {
		t.Fatalf("%d tokens of held-out text, want %d", len(ids), n*(T+1))
	}
	rows := make([][]int32, n)
	for i := range rows {
		rows[i] = make([]int32, T+1)
		for k := range rows[i] {
			rows[i][k] = int32(ids[i*(T+1)+k])
		}
	}
	return rows
}

func mustParent(t testing.TB) string {
	t.Helper()
	d, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func rel1(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }

// vecErr is max |a−b| over max |b|, NaNs required in the same places.
func vecErr(t *testing.T, what string, got, want []float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: torch has %d values, native %d", what, len(got), len(want))
		return math.Inf(1)
	}
	var d, m float64
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) {
			t.Errorf("%s[%d]: torch %v, native %v", what, i, got[i], want[i])
			continue
		}
		if math.IsNaN(want[i]) {
			continue
		}
		d = max(d, math.Abs(got[i]-want[i]))
		m = max(m, math.Abs(want[i]))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// TestImportanceParity: the torch job's scores on 2 ranks, read back by
// importance.Load, equal importance.Compute's on the same rows (≤ 1e-4
// relative, the same orderings), on the parent and a DeciLM child with
// removed sub-blocks (the parent without -short).
func TestImportanceParity(t *testing.T) {
	needTorch(t)
	const batch = 4
	cases := []struct {
		name, dir string
		T         int
		opt       importance.Options
		recipe    map[string]any
	}{
		// Skip losses on 4 of the 8 rows, spread evenly (importance.Scored).
		{"decilm-child", deciChild(t), 32, importance.Options{SkipRows: 4}, map[string]any{"skip_rows": 4}},
		// A budget of 4 equivalent passes: regression estimates from a
		// few whole sequences, and a round two.
		{"parent-budget", mustParent(t), 128, importance.Options{Passes: 4}, map[string]any{"skip_passes": 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name != "decilm-child" {
				t.Skip("-short: the DeciLM child (removed sub-blocks included) covers the short run")
			}
			T := c.T
			rows := parentRows(t, 8, T)
			m, err := engine.Load(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			c.opt.Batch = batch
			want, err := importance.Compute(context.Background(), m, rows, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			recipe := map[string]any{"seq_len": T, "batch": batch}
			for k, v := range c.recipe {
				recipe[k] = v
			}
			j := newJob(t, "importance", 2, recipe)
			j.model("model", c.dir)
			j.rows("valid", rows)
			contract, entry := j.write()
			mustRun(t, entry, contract, 2)
			file := j.result()["importance"].(string)
			got, err := importance.Load(filepath.Join(j.dir, file))
			if err != nil {
				t.Fatal(err)
			}
			hash, err := importance.HashModelDir(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Matches(hash, want.DataHash) {
				t.Errorf("torch scores carry model %s data %s; native %s %s", got.ModelHash, got.DataHash, hash, want.DataHash)
			}
			worst := 0.0
			check := func(what string, g, w []float64, order bool) {
				e := vecErr(t, what, g, w)
				worst = max(worst, e)
				if e > 1e-4 {
					t.Errorf("%s: %.3g relative (want ≤ 1e-4)", what, e)
				}
				if order && !slices.Equal(importance.Ranking(g), importance.Ranking(w)) {
					t.Errorf("%s: torch ranks %v, native %v", what, importance.Ranking(g), importance.Ranking(w))
				}
			}
			check("hidden", got.Hidden, want.Hidden, true)
			check("layer_bi", got.LayerBI, want.LayerBI, true)
			check("layer_skip_loss", got.LayerSkipLoss, want.LayerSkipLoss, true)
			check("attn_bi", got.AttnBI, want.AttnBI, false)
			check("mlp_bi", got.MLPBI, want.MLPBI, false)
			check("attn_skip_loss", got.AttnSkipLoss, want.AttnSkipLoss, false)
			check("mlp_skip_loss", got.MLPSkipLoss, want.MLPSkipLoss, false)
			for l := range want.Heads {
				check(fmt.Sprintf("layer %d heads", l), got.Heads[l], want.Heads[l], true)
				check(fmt.Sprintf("layer %d head channels", l), got.HeadChannels[l], want.HeadChannels[l], false)
				check(fmt.Sprintf("layer %d neurons", l), got.Neurons[l], want.Neurons[l], true)
				if !slices.EqualFunc(got.HeadOrder(l), want.HeadOrder(l), slices.Equal[[]int]) {
					t.Errorf("layer %d: head order %v, native %v", l, got.HeadOrder(l), want.HeadOrder(l))
				}
			}
			if got.SkipSequences != want.SkipSequences || got.SkipTokens != want.SkipTokens || rel1(got.Passes, want.Passes) > 1e-9 {
				t.Errorf("skip losses scored on %d rows × %d tokens (%g passes), native %d × %d (%g)",
					got.SkipSequences, got.SkipTokens, got.Passes, want.SkipSequences, want.SkipTokens, want.Passes)
			}
			if got.Budget != want.Budget || got.SkipRegression != want.SkipRegression {
				t.Errorf("pass budget %g, regression %v; native %g, %v", got.Budget, got.SkipRegression, want.Budget, want.SkipRegression)
			}
			if c.opt.Passes > 0 && !want.SkipRegression {
				t.Errorf("the budget case scored every sequence: it tests no regression estimate")
			}
			if e := rel1(got.BaseLoss, want.BaseLoss); e > 1e-6 {
				t.Errorf("base loss %v, native %v", got.BaseLoss, want.BaseLoss)
			}
			t.Logf("%s: worst score difference %.3g relative; base loss torch %.7f native %.7f", c.name, worst, got.BaseLoss, want.BaseLoss)
		})
	}
}

// TestPerplexityParity: the eval job's perplexity on 2 ranks equals the
// native engine's (train.MeanLoss) to 4 significant digits.
func TestPerplexityParity(t *testing.T) {
	needTorch(t)
	const T, batch = 32, 4
	rows := parentRows(t, 10, T)
	dir := mustParent(t)
	m, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := train.MeanLoss(m, rows, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := math.Exp(l)
	j := newJob(t, "eval", 2, map[string]any{"seq_len": T, "batch": batch})
	j.model("model", dir)
	j.rows("valid", rows)
	contract, entry := j.write()
	mustRun(t, entry, contract, 2)
	got := j.result()["perplexity"].(float64)
	g4, w4 := strconv.FormatFloat(got, 'g', 4, 64), strconv.FormatFloat(want, 'g', 4, 64)
	t.Logf("perplexity: torch %.6f, native %.6f (relative %.2g)", got, want, rel1(got, want))
	if g4 != w4 {
		t.Errorf("perplexity %s, native %s (4 significant digits)", g4, w4)
	}
}

// TestRefusals: a contract the trainer cannot run is refused before any
// work, with exit status 2 and a message (on stderr and in result.json)
// that says what to fix.
func TestRefusals(t *testing.T) {
	needTorch(t)
	const T = 16
	rows := randomRows(8, T, 4096, 3)
	cases := []struct {
		name  string
		edit  func(j *testJob)
		world string // WORLD_SIZE of the one rank started
		want  string
	}{
		{"hash", func(j *testJob) {
			p := filepath.Join(j.dir, "model", "config.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, ' '), 0o644)
		}, "1", "model/config.json: its hash is not the contract's"},
		{"batch", func(j *testJob) {
			j.contract["world_size"] = 2
			j.contract["recipe"].(map[string]any)["batch"] = 3
		}, "2", "batch 3 is not a multiple of world_size 2"},
		{"world", func(j *testJob) { j.contract["world_size"] = 2 }, "1", "world_size is 2 but 1 rank(s) were started"},
		{"shape", func(j *testJob) {
			sh := j.contract["model"].(map[string]any)["shape"].(map[string]any)
			sh["hidden"] = 96
		}, "1", "model/config.json does not have the contract's shape: hidden is 192"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := newJob(t, "eval", 1, map[string]any{"seq_len": T, "batch": 4})
			j.model("model", mustParent(t))
			j.rows("valid", rows)
			c.edit(j)
			contract, entry := j.write()
			cmd := pyCmd(entry, contract)
			cmd.Env = append(cmd.Env, "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE="+c.world, "MASTER_ADDR=127.0.0.1",
				fmt.Sprintf("MASTER_PORT=%d", freePort(t)))
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("exit %d, want 2 (refused):\n%s", code, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("message %q does not say %q", out, c.want)
			}
			if res := j.result(); res["status"] != "failed" || !strings.Contains(res["error"].(string), c.want) {
				t.Errorf("result.json %v", res)
			}
		})
	}
}

// TestProxyParity: the proxy job's mean KL(teacher ‖ student) on 2 ranks
// equals proxy.KL's on the same rows.
func TestProxyParity(t *testing.T) {
	needTorch(t)
	const T, batch = 32, 4
	rows := parentRows(t, 8, T)
	teacher, student := mustParent(t), deciChild(t)
	pm, err := engine.Load(teacher)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := engine.Load(student)
	if err != nil {
		t.Fatal(err)
	}
	want, err := proxy.KL(context.Background(), pm, cm, rows, proxy.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	j := newJob(t, "proxy", 2, map[string]any{"seq_len": T, "batch": batch})
	j.model("teacher", teacher)
	j.model("student", student)
	j.rows("valid", rows)
	contract, entry := j.write()
	mustRun(t, entry, contract, 2)
	got := j.result()["kl"].(float64)
	t.Logf("KL(teacher ‖ student): torch %.7f, native %.7f (%.2g relative)", got, want.KL, rel1(got, want.KL))
	if rel1(got, want.KL) > 1e-4 {
		t.Errorf("KL %.7f, native %.7f: more than 1e-4 apart", got, want.KL)
	}
}

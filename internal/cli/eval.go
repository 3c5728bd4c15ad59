package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/eval"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/job"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/workload"
)

// evalParentData is the --data prefix that names a part of the embedded
// parent's text.
const evalParentData = parent.DataPrefix

func init() {
	Register(&Command{
		Name:  "eval",
		Usage: "--model DIR [--model DIR...] [--data FILE|parent:SPLIT] [--task NAME=PATH...] [--limit N] [--seq-len N] [--stride N] [--json]\n       eval --build SUITE.jsonl --data FILE|parent:SPLIT [--seed N] [--items N] [--force]\n       eval --engine lm-eval --emit DIR --model DIR|NAME [--endpoint URL] [--task avg8] [--limit N] [--force]\n       eval --import [NAME=]RESULTS.json... [--task avg8] [--json]",
		Short: "perplexity, bits per byte and log-likelihood tasks (LAMBADA, HellaSwag, PIQA, MMLU, quiz, in-domain)",
		Long: `Scores HuggingFace checkpoint directories with the native engine.

Perplexity (--data). Text is tokenized with the model's tokenizer.json (or
--tokenizer), prefixed with the model's BOS (or end-of-text) token so that
the first word is predicted too, and scored in packed windows of --seq-len
tokens: consecutive windows, every token predicted once, with 1..seq-len
tokens of context. With --stride S (< seq-len) the windows slide by S tokens
instead and every token gets at least seq-len−S tokens of context, at
seq-len/S times the cost. Reports perplexity (exp of the mean negative
log-likelihood per token) and bits per byte (total negative log-likelihood
in bits over the text's UTF-8 bytes, comparable across tokenizers).
Pre-tokenized id files (tokenizer.ReadIDs text or binary form; chosen by
--ids, a .ids extension or the binary magic) give perplexity only; each line
is scored as its own sequence. --data parent:test (parent:validation,
parent:train-sample) is that part of the embedded parent's text, built into
the binary; parent:train, the whole training part, is cut from the corpora
under --assets (scripts/fetch-assets.sh).

Tasks (--task NAME=PATH, repeatable; nothing is downloaded), scored by
log-likelihood with lm-evaluation-harness's conventions:
  lambada=FILE     acc (greedy last word) and perplexity of the last word
  hellaswag=FILE   acc, acc_norm (jsonl or llama.cpp's 6-line text, .bz2 too)
  piqa=FILE        acc, acc_norm (FILE-labels.lst beside it)
  mmlu=DIR         5-shot acc over test/*_test.csv with dev/*_dev.csv shots
  quiz=DIR         the Debian bsdgames quiz files: acc, acc_norm of 4 choices
  suite=FILE       an in-domain suite from --build: cloze and choice
  arc_challenge=FILE, arc_easy=FILE
                   acc, acc_norm (AI2's ARC-*-Test.jsonl)
  winogrande=FILE  acc, the harness's partial scoring (dev.jsonl)
  truthfulqa=FILE  truthfulqa_mc1 (acc) and truthfulqa_mc2 (probability
                   mass on the true answers) from mc_task.json
and by greedy generation (many prompts per engine step, until the task's
stop sequences or 256 new tokens; programs run by /usr/bin/python3 in a
sandbox: own process group, no network, CPU, memory and wall limits):
  gsm8k=FILE       8-shot chain of thought: exact match, strict and flexible
  humaneval=FILE   pass@1 (HumanEval.jsonl or .jsonl.gz)
  mbpp=FILE        3-shot pass@1 on the test problems 11-510 (mbpp.jsonl)
  ifeval=FILE      IFEval's instruction checks on the responses: prompt- and
                   instruction-level accuracy, strict and loose
                   (google-research's input_data.jsonl)
and as a named suite:
  avg8=DIR         the paper's eight tests (GSM8K, ARC-Challenge,
                   Winogrande, HumanEval, MBPP, MMLU, TruthfulQA MC2,
                   IFEval) from DIR, which holds the files by the names of
                   ../shared/data/eval; prints every score ± stderr, parent
                   and children side by side, the average, and the tests
                   this build cannot score
--limit N keeps the first N items (per MMLU subject and quiz file); items
are always in file order. Every accuracy is printed with its standard error
(the harness's: √(p(1−p)/(n−1)); perplexity: bootstrap).

--model given several times prints one side-by-side table (the first
column is usually the parent, the others its children). With one --model
and only --data the output is as it has always been; --json then prints one
object, and with several models or tasks an object per model under
"models" (a list of eval.ModelReport), with a suite's table under "suite".

--build SUITE.jsonl writes an in-domain suite from --data: --items
last-word cloze and --items pick-the-true-continuation questions, drawn
with --seed, so that small models that sit at chance on the public tasks
still show differences (eval.BuildSuite). Score it with --task suite=FILE.

--model parent scores the embedded parent model (package parent).

A model too large for the native engine is scored by lm-evaluation-harness:
--engine lm-eval --emit DIR writes DIR/lm_eval.sh, the harness's commands
for the suite (--task avg8, the default) on --model, run by vLLM inside the
harness or, with --endpoint http://HOST:8000/v1/completions, against a
served model; tasks, few-shot counts and greedy decoding match the native
ones (eval.HarnessScript). --import RESULTS.json (repeatable; NAME=FILE
names the model, files of one model merge) reads the harness's results
files back into the same tables.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var models, tasks stringList
			fs.Var(&models, "model", "model `directory` (HF checkpoint), or \"parent\"; repeat for a side-by-side table")
			dataFiles := dataFlag(fs, "text or token-id (or parent:SPLIT)")
			fs.Var(&tasks, "task", "`NAME=PATH` task to run: "+strings.Join(eval.TaskList(), ", ")+" (repeatable)")
			limit := intArg(fs, "limit", 0, 0, maxCount, "first `N` items of each task (per MMLU subject or quiz); 0 = all")
			assets := fs.String("assets", ".", "module root holding testdata/ext (for --data parent:train)")
			tokPath := fs.String("tokenizer", "", "tokenizer.json (default: the model's)")
			ids := fs.Bool("ids", false, "the data file holds token ids")
			build := fs.String("build", "", "write an in-domain suite built from --data to this `file`")
			seed := fs.Uint64("seed", 1, "seed of --build")
			items := intArg(fs, "items", 200, 1, maxCount, "cloze and choice items each for --build")
			force := fs.Bool("force", false, "replace an existing --build file")
			var o eval.Options
			intVar(fs, &o.SeqLen, "seq-len", 128, 1, maxTokens, "window length in tokens")
			intVar(fs, &o.Stride, "stride", 0, 0, maxTokens, "sliding-window stride (0: packed windows)")
			intVar(fs, &o.Batch, "batch", 8, 1, maxBatch, "windows per forward pass")
			jsonOut := fs.Bool("json", false, "print the result as JSON")
			endpoint := fs.String("endpoint", "", "with --engine lm-eval: an OpenAI-compatible completions `URL` serving --model")
			var imports stringList
			fs.Var(&imports, "import", "`[NAME=]FILE` lm-evaluation-harness results file to read (repeatable)")
			allowLong := fs.Bool("allow-long-context", false, "allow --seq-len past the model's max_position_embeddings")
			stream := fs.Bool("stream-layers", false, "release each layer's weight pages after it has run, so a model larger than memory still runs (at disk speed)")
			jf := addJobFlags(fs)
			fs.Lookup("engine").Usage += "; or lm-eval: write lm-evaluation-harness's commands into --emit DIR"
			fs.Lookup("emit").Usage += "; with --engine lm-eval: where the harness's commands go"
			return func(ctx context.Context, env *Env, args []string) error {
				data := append(*dataFiles, args...)
				if len(imports) > 0 {
					return evalImport(env, imports, tasks, *jsonOut)
				}
				if jf.engine == "lm-eval" {
					return evalEmit(env, jf.emit, models, *endpoint, *tokPath, tasks, *limit, *force)
				}
				if _, ok := job.LookupEngine(jf.engine); !ok && !jf.native() {
					return Usagef("--engine %q: want native, lm-eval or %s", jf.engine, strings.Join(job.EngineNames(), ", "))
				}
				if *endpoint != "" {
					return Usagef("--endpoint goes with --engine lm-eval")
				}
				if jf.native() && jf.emit != "" {
					return Usagef("--emit goes with --engine lm-eval or a PyTorch engine (%s)", strings.Join(job.EngineNames(), ", "))
				}
				if *build != "" {
					if len(data) != 1 {
						return Usagef("--build needs --data: one file or parent:SPLIT to cut the suite from (got %d)", len(data))
					}
					return evalBuild(env, *build, data[0], *assets, *seed, *items, *force, *jsonOut)
				}
				if o.Stride > o.SeqLen {
					return Usagef("--stride %d is larger than --seq-len %d: windows would skip tokens; want 0 (packed windows) to %d", o.Stride, o.SeqLen, o.SeqLen)
				}
				if len(models) == 0 || (len(data) == 0 && len(tasks) == 0) {
					return Usagef("--model and --data are required (or --task NAME=PATH instead of --data, or --build)")
				}
				if err := jf.check(""); err != nil {
					return err
				}
				if !jf.native() {
					if len(models) != 1 || len(tasks) > 0 || o.Stride != 0 {
						return Usagef("--engine %s runs perplexity of one --model on --data in packed windows (no --task, no --stride)", jf.engine)
					}
					dir, err := checkpointDir(models[0])
					if err != nil {
						return err
					}
					ec := job.EmitConfig{Kind: job.Eval, Model: dir, Data: data, Assets: *assets, Rows: jobEvalRows,
						Recipe: job.Recipe{SeqLen: o.SeqLen, Batch: o.Batch}}
					res, err := jf.run(ctx, env, ec, "", false, *jsonOut)
					if err != nil || res == nil || res.Ingested == nil || *jsonOut {
						return err
					}
					r := res.Ingested.Result
					fmt.Fprintf(env.Stdout, "%s on %s (%s, %d rank(s)): perplexity %.3f (loss %.4f nats per token)\n", models[0], strings.Join(data, ", "), jf.engine, r.WorldSize, *r.Perplexity, *r.Loss)
					return nil
				}
				dirs := make([]string, len(models))
				for i, name := range models {
					var err error
					if dirs[i], err = engineCheckpoint("--model", name); err != nil {
						return err
					}
				}
				cfg := eval.Config{Windows: o, Limit: *limit}
				suite, unavailable := "", []eval.Unavailable(nil)
				for _, t := range tasks {
					if name, dir, ok := strings.Cut(t, "="); ok && eval.Suites[name] != nil {
						ts, un, err := eval.LoadSuite(name, dir)
						if err != nil {
							return err
						}
						suite, unavailable = name, un
						cfg.Tasks = append(cfg.Tasks, ts...)
						continue
					}
					ts, err := eval.LoadTaskSpec(t)
					if errors.As(err, new(*eval.SpecError)) {
						return Usagef("%v", err)
					}
					if errors.As(err, new(*eval.UnknownTaskError)) {
						return Usagef("--task %s: %v", t, err)
					}
					if err != nil {
						return err
					}
					cfg.Tasks = append(cfg.Tasks, ts...)
				}
				var ms []eval.Model
				for i, name := range models {
					m, err := engine.LoadWith(dirs[i], engine.LoadOptions{Mapped: true, Stream: *stream})
					if err != nil {
						return err
					}
					defer m.Close()
					w := workload.FixedClosed(o.SeqLen, 0, 1)
					if _, err := w.FitContext(workload.ContextRule{MaxPositions: m.Arch().MaxPositions, AllowLong: *allowLong, AllowFlag: allowLongFlag, What: fmt.Sprintf("--seq-len %d", o.SeqLen)}); err != nil {
						return Usagef("%v", err)
					}
					em := eval.Model{Name: name, Model: m}
					if len(cfg.Tasks) > 0 || dataset.NeedsTokenizer(data, *ids) {
						if em.Tok, err = dataset.LoadTokenizer(dirs[i], *tokPath); err != nil {
							return err
						}
					}
					ms = append(ms, em)
				}
				for _, p := range data {
					d, err := evalData(p, *assets, *ids)
					if err != nil {
						return err
					}
					cfg.Data = append(cfg.Data, d)
				}
				term := progress.NewTerminal(env.Stderr)
				cfg.Progress = term.Report
				var rep *eval.Report
				var err error
				if len(cfg.Tasks) > 0 || len(cfg.Data) > 0 {
					rep, err = eval.Run(ctx, ms, cfg)
				} else { // a suite none of whose tests this build scores
					rep = &eval.Report{}
					for _, m := range ms {
						rep.Models = append(rep.Models, eval.ModelReport{Model: m.Name, Params: m.Model.NumParams()})
					}
				}
				term.End()
				if err != nil {
					return err
				}
				if suite != "" {
					if rep.Suite, err = rep.ScoreSuite(suite, unavailable); err != nil {
						return err
					}
				}
				return evalPrint(env, rep, len(ms) == 1 && len(cfg.Tasks) == 0 && suite == "", *jsonOut)
			}
		},
	})
}

// jobEvalRows bounds the rows of a PyTorch perplexity job.
const jobEvalRows = maxCount

// evalPrint writes the report: with one model and perplexity only, the
// output autocompress eval has always printed.
func evalPrint(env *Env, rep *eval.Report, plain, jsonOut bool) error {
	if jsonOut {
		if plain {
			return writeJSON(env.Stdout, rep.Models[0])
		}
		return writeJSON(env.Stdout, rep)
	}
	if !plain {
		if rep.Suite != nil && len(rep.Models) > 0 && len(rep.Models[0].Tasks) == 0 && rep.Models[0].PerplexityResult == nil {
			return rep.Suite.WriteText(env.Stdout)
		}
		if err := rep.WriteText(env.Stdout); err != nil || rep.Suite == nil {
			return err
		}
		fmt.Fprintln(env.Stdout)
		return rep.Suite.WriteText(env.Stdout)
	}
	m := rep.Models[0]
	res := m.PerplexityResult
	mode := "packed windows"
	if res.Stride > 0 && res.Stride < res.SeqLen {
		mode = fmt.Sprintf("sliding windows, stride %d", res.Stride)
	}
	fmt.Fprintf(env.Stdout, "%s on %s: %d tokens (%s of %d)\nperplexity    %.3f\n", m.Model, strings.Join(res.Data, ", "), res.Tokens, mode, res.SeqLen, res.Perplexity)
	if res.Bytes > 0 {
		fmt.Fprintf(env.Stdout, "bits per byte %.4f (%d bytes)\n", res.BitsPerByte, res.Bytes)
	}
	return nil
}

// evalSuiteName is the suite named by --task (NAME or NAME=DIR), avg8 when
// no --task is given; a --task that is not a suite is a usage error.
func evalSuiteName(tasks []string, with string) (string, error) {
	if len(tasks) == 0 {
		return "avg8", nil
	}
	if len(tasks) > 1 {
		return "", Usagef("%s takes one --task, a suite (%s); got %d", with, strings.Join(eval.SuiteList(), ", "), len(tasks))
	}
	name, _, _ := strings.Cut(tasks[0], "=")
	if eval.Suites[name] == nil {
		return "", Usagef("--task %s: %s takes a suite: %s", tasks[0], with, strings.Join(eval.SuiteList(), ", "))
	}
	return name, nil
}

// evalEmit writes the lm-evaluation-harness commands for the suite into
// dir/lm_eval.sh.
func evalEmit(env *Env, dir string, models []string, endpoint, tokenizer string, tasks []string, limit int, force bool) error {
	if dir == "" {
		return Usagef("--engine lm-eval needs --emit DIR: where to write the harness's commands")
	}
	if len(models) != 1 {
		return Usagef("--engine lm-eval takes one --model: the checkpoint directory vLLM loads, or with --endpoint the served model's name (got %d)", len(models))
	}
	if models[0] == "parent" {
		return Usagef("--model parent: the embedded parent is scored natively (eval --model parent --task avg8=DIR); the harness needs a checkpoint directory")
	}
	suite, err := evalSuiteName(tasks, "--engine lm-eval")
	if err != nil {
		return err
	}
	script, err := eval.HarnessScript(eval.HarnessOptions{Suite: suite, Model: models[0], Endpoint: endpoint, Tokenizer: tokenizer,
		Output: filepath.Join(dir, "results"), Limit: limit})
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "lm_eval.sh")
	if err := output.Check(out, force); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := output.WriteFile(out, []byte(script), force); err != nil {
		return fmt.Errorf("--emit: %w", err)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: lm-evaluation-harness commands for the %s suite on %s\nrun it where lm_eval (and vLLM) are installed, then read the results with the eval --import line it names\n", out, suite, models[0])
	return nil
}

// evalImport reads lm-evaluation-harness results files and prints them
// with the suite's table.
func evalImport(env *Env, specs, tasks []string, jsonOut bool) error {
	suite, err := evalSuiteName(tasks, "--import")
	if err != nil {
		return err
	}
	rep, err := eval.ImportHarness(specs)
	if err != nil {
		return err
	}
	if rep.Suite, err = rep.ScoreSuite(suite, nil); err != nil {
		return err
	}
	return evalPrint(env, rep, false, jsonOut)
}

// evalData reads --data (dataset.ReadWhole); an unknown parent: split is a
// usage error naming the flag.
func evalData(data, assets string, ids bool) (*eval.Data, error) {
	d, err := dataset.ReadWhole(data, assets, ids)
	if errors.As(err, new(*parent.UnknownSplitError)) {
		part := strings.TrimPrefix(data, evalParentData)
		return nil, Usagef("--data %s: unknown split %q (want parent:test, parent:validation, parent:train-sample or parent:train)", data, part)
	}
	if err != nil {
		return nil, err
	}
	return &eval.Data{Name: d.Name, Text: d.Text, IDs: d.IDs}, nil
}

// evalBuildJSON is eval --build --json.
type evalBuildJSON struct {
	Suite  string `json:"suite"`
	Data   string `json:"data"`
	Seed   uint64 `json:"seed"`
	Cloze  int    `json:"cloze"`
	Choice int    `json:"choice"`
}

// evalBuild writes an in-domain suite built from data to out.
func evalBuild(env *Env, out, data, assets string, seed uint64, items int, force, jsonOut bool) error {
	if data == "" {
		return Usagef("--build needs --data: the held-out text to cut the suite from (a file or parent:SPLIT)")
	}
	if err := output.Check(out, force); err != nil {
		return err // before the work, not after it
	}
	d, err := evalData(data, assets, false)
	if err != nil {
		return err
	}
	if d.IDs != nil {
		return Usagef("--build needs text, not token ids")
	}
	suite, err := eval.BuildSuite(string(d.Text), eval.SuiteOptions{Seed: &seed, Cloze: items, Choice: items})
	if err != nil {
		return fmt.Errorf("%s: %w", data, err)
	}
	var b bytes.Buffer
	if err := eval.WriteSuite(&b, suite); err != nil {
		return err
	}
	if err := output.WriteFile(out, b.Bytes(), force); err != nil {
		return fmt.Errorf("--build: %w", err)
	}
	n := map[string]int{}
	for _, it := range suite {
		n[it.Kind]++
	}
	if jsonOut {
		return writeJSON(env.Stdout, evalBuildJSON{Suite: out, Data: data, Seed: seed, Cloze: n["cloze"], Choice: n["choice"]})
	}
	fmt.Fprintf(env.Stdout, "%s: %d cloze and %d choice items from %s (seed %d)\n", out, n["cloze"], n["choice"], data, seed)
	if n["cloze"] < items || n["choice"] < items {
		fmt.Fprintf(env.Stderr, "eval --build: asked for %d of each; the text holds no more non-overlapping passages\n", items)
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

package eval

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// FormatError reports an evaluation file that is not in the expected
// format: the file, the line (1-based; 0 when it is about the whole file)
// and what was expected.
type FormatError struct {
	File string
	Line int
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("eval: %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("eval: %s: %s", e.File, e.Msg)
}

// A TaskKind is one task format LoadTask reads: what files it takes, in
// words, and how to load them. A new evaluation task is one entry of
// TaskKinds (and its parser).
type TaskKind struct {
	About string
	Load  func(path string) ([]*Task, error)
}

// one wraps a loader of a single task.
func one(load func(path string) (*Task, error)) func(string) ([]*Task, error) {
	return func(path string) ([]*Task, error) {
		t, err := load(path)
		if err != nil {
			return nil, err
		}
		return []*Task{t}, nil
	}
}

// TaskKinds are the task formats LoadTask knows, by name.
var TaskKinds = map[string]TaskKind{
	"lambada": {"LAMBADA: JSON lines {\"text\": ...} (OpenAI's lambada_test.jsonl) or one passage per line",
		one(func(p string) (*Task, error) { return readFileTask(p, ParseLAMBADA) })},
	"hellaswag": {"HellaSwag: the official JSON lines (ctx_a, ctx_b, endings, label) or llama.cpp's 6-line text, optionally .bz2",
		one(func(p string) (*Task, error) { return readFileTask(p, ParseHellaSwag) })},
	"piqa": {"PIQA: JSON lines {goal, sol1, sol2} with a line-aligned NAME-labels.lst beside it (or a label field)",
		one(func(p string) (*Task, error) { return LoadPIQA(p, "") })},
	"mmlu": {"MMLU 5-shot: a directory with test/*_test.csv and dev/*_dev.csv (hendrycks/test), or one *_test.csv", one(LoadMMLU)},
	"quiz": {"the Debian bsdgames quiz directory (its index file names each quiz)", one(LoadQuiz)},
	"suite": {"an in-domain suite written by eval --build (JSON lines)", func(path string) ([]*Task, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		defer f.Close()
		return ParseSuite(path, f)
	}},
	"gsm8k": {"GSM8K 8-shot chain of thought (generation): JSON lines {question, answer} (openai/grade-school-math test.jsonl)",
		one(func(p string) (*Task, error) { return readFileTask(p, ParseGSM8K) })},
	"humaneval": {"HumanEval pass@1 (generation, programs run in a sandbox): JSON lines, optionally .gz (openai/human-eval HumanEval.jsonl.gz)",
		one(func(p string) (*Task, error) { return openMaybeGzip(p, ParseHumanEval) })},
	"mbpp": {"MBPP pass@1, 3-shot, test problems 11-510 (generation, programs run in a sandbox): JSON lines (google-research mbpp.jsonl)",
		one(func(p string) (*Task, error) { return openMaybeGzip(p, ParseMBPP) })},
}

// TaskList returns the known task names, sorted.
func TaskList() []string {
	names := make([]string, 0, len(TaskKinds))
	for n := range TaskKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnknownTaskError reports a task name LoadTask does not know.
type UnknownTaskError struct{ Name string }

func (e *UnknownTaskError) Error() string {
	return fmt.Sprintf("eval: unknown task %q (known: %s; suites: %s)", e.Name, strings.Join(TaskList(), ", "), strings.Join(SuiteList(), ", "))
}

// LoadTask reads the task name from path. A suite file gives one task per
// kind of item it holds; the others one task.
func LoadTask(name, path string) ([]*Task, error) {
	k, ok := TaskKinds[name]
	if !ok {
		return nil, &UnknownTaskError{Name: name}
	}
	return k.Load(path)
}

// readFileTask opens path (decompressing .bz2) and parses it.
func readFileTask(path string, parse func(string, io.Reader) (*Task, error)) (*Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".bz2") {
		r = bzip2.NewReader(f)
	}
	return parse(path, r)
}

// lines calls fn for every line of r (without its line ending), numbered
// from 1. A read error (a corrupt .bz2) is reported with the line reached.
func lines(name string, r io.Reader, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := string(bytes.TrimSuffix(sc.Bytes(), []byte("\r")))
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return &FormatError{File: name, Line: n + 1, Msg: fmt.Sprintf("reading: %v", err)}
	}
	return nil
}

// SpecError is a task given in a form other than NAME=PATH.
type SpecError struct{ Spec string }

func (e *SpecError) Error() string { return e.Spell(nil) }

// Spell returns the message with the task setting ("task") spelled by spell
// (a command's flags); nil gives the library's words (Error).
func (e *SpecError) Spell(spell func(name string) string) string {
	task := "task"
	if spell != nil {
		task = spell("task")
	}
	return fmt.Sprintf("%s %q: want NAME=PATH with NAME one of %s", task, e.Spec, strings.Join(TaskList(), ", "))
}

// LoadTaskSpec reads a task given as NAME=PATH (the --task flag's form):
// a spec without "=" or without a path is a *SpecError, an unknown name an
// *UnknownTaskError, both before any file is read.
func LoadTaskSpec(spec string) ([]*Task, error) {
	name, path, ok := strings.Cut(spec, "=")
	if !ok || path == "" {
		return nil, &SpecError{Spec: spec}
	}
	if _, known := TaskKinds[name]; !known {
		return nil, &UnknownTaskError{Name: name}
	}
	return LoadTask(name, path)
}

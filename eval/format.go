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

// TaskNames are the task names LoadTask knows, each with the files it reads.
var TaskNames = map[string]string{
	"lambada":   "LAMBADA: JSON lines {\"text\": ...} (OpenAI's lambada_test.jsonl) or one passage per line",
	"hellaswag": "HellaSwag: the official JSON lines (ctx_a, ctx_b, endings, label) or llama.cpp's 6-line text, optionally .bz2",
	"piqa":      "PIQA: JSON lines {goal, sol1, sol2} with a line-aligned NAME-labels.lst beside it (or a label field)",
	"mmlu":      "MMLU 5-shot: a directory with test/*_test.csv and dev/*_dev.csv (hendrycks/test), or one *_test.csv",
	"quiz":      "the Debian bsdgames quiz directory (its index file names each quiz)",
	"suite":     "an in-domain suite written by eval --build (JSON lines)",
}

// TaskList returns the known task names, sorted.
func TaskList() []string {
	names := make([]string, 0, len(TaskNames))
	for n := range TaskNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnknownTaskError reports a task name LoadTask does not know.
type UnknownTaskError struct{ Name string }

func (e *UnknownTaskError) Error() string {
	return fmt.Sprintf("eval: unknown task %q (known: %s)", e.Name, strings.Join(TaskList(), ", "))
}

// LoadTask reads the task name from path. A suite file gives one task per
// kind of item it holds; the others one task.
func LoadTask(name, path string) ([]*Task, error) {
	var t *Task
	var err error
	switch name {
	case "lambada":
		t, err = readFileTask(path, ParseLAMBADA)
	case "hellaswag":
		t, err = readFileTask(path, ParseHellaSwag)
	case "piqa":
		t, err = LoadPIQA(path, "")
	case "mmlu":
		t, err = LoadMMLU(path)
	case "quiz":
		t, err = LoadQuiz(path)
	case "suite":
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		defer f.Close()
		return ParseSuite(path, f)
	default:
		return nil, &UnknownTaskError{Name: name}
	}
	if err != nil {
		return nil, err
	}
	return []*Task{t}, nil
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

func (e *SpecError) Error() string {
	return fmt.Sprintf("--task %q: want NAME=PATH with NAME one of %s", e.Spec, strings.Join(TaskList(), ", "))
}

// LoadTaskSpec reads a task given as NAME=PATH (the --task flag's form):
// a spec without "=" or without a path is a *SpecError, an unknown name an
// *UnknownTaskError, both before any file is read.
func LoadTaskSpec(spec string) ([]*Task, error) {
	name, path, ok := strings.Cut(spec, "=")
	if !ok || path == "" {
		return nil, &SpecError{Spec: spec}
	}
	if _, known := TaskNames[name]; !known {
		return nil, &UnknownTaskError{Name: name}
	}
	return LoadTask(name, path)
}

package eval

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

// Model is one model to evaluate, with its tokenizer (nil for token ids
// and no tasks).
type Model struct {
	Name  string
	Model *engine.Model
	Tok   Encoder
}

// Data is held-out text, or pre-tokenized sequences, to score for
// perplexity.
type Data struct {
	Name string
	Text []byte  // UTF-8 text (perplexity and bits per byte), or
	IDs  [][]int // token-id sequences (perplexity only)
}

// Config says what Run measures.
type Config struct {
	Data    []*Data // perplexity, pooled over the data (none: not measured)
	Windows Options // windows for Data
	Tasks   []*Task
	Limit   int // items per task group (0 = all)
	// Progress receives the scored windows and requests, each as the
	// phase "MODEL TASK" ("MODEL perplexity"); nil = none. It replaces
	// Windows.Progress.
	Progress progress.Func
}

// PerplexityResult is a model's perplexity on Data, pooled over its
// parts (every token of every part predicted once).
type PerplexityResult struct {
	Data        []string `json:"data"`
	Tokens      int      `json:"tokens"`
	NLL         float64  `json:"nll"`
	Perplexity  float64  `json:"perplexity"`
	SeqLen      int      `json:"seq_len"`
	Stride      int      `json:"stride"`
	Windows     int      `json:"windows"`
	Bytes       int      `json:"bytes,omitempty"`
	BitsPerByte float64  `json:"bits_per_byte,omitempty"` // absent for token ids
}

// ModelReport is everything measured on one model.
type ModelReport struct {
	Model  string `json:"model"`
	Params int    `json:"params"`
	*PerplexityResult
	Tasks   []TaskResult `json:"tasks,omitempty"`
	Seconds float64      `json:"seconds"`
}

// Report is the outcome of Run, one entry per model in the order given.
type Report struct {
	Models []ModelReport `json:"models"`
	// Suite is a named suite's table (avg8), when one was run.
	Suite *SuiteScores `json:"suite,omitempty"`
}

// Run measures every model on cfg.Data and cfg.Tasks.
func Run(ctx context.Context, models []Model, cfg Config) (*Report, error) {
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, m := range models {
		t0 := time.Now()
		mr := ModelReport{Model: m.Name, Params: m.Model.NumParams()}
		if len(cfg.Data) > 0 {
			parts := make([]*Result, len(cfg.Data))
			names := make([]string, len(cfg.Data))
			for i, d := range cfg.Data {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				var err error
				wo := cfg.Windows
				wo.Progress = cfg.Progress.Phase(m.Name + " perplexity")
				if d.IDs != nil {
					parts[i], err = IDs(ctx, m.Model, d.IDs, wo)
				} else {
					if m.Tok == nil {
						return nil, fmt.Errorf("eval: %s: scoring text needs a tokenizer", m.Name)
					}
					parts[i], err = Text(ctx, m.Model, m.Tok, d.Name, d.Text, wo)
				}
				if err != nil {
					return nil, fmt.Errorf("%s on %s: %w", m.Name, d.Name, err)
				}
				names[i] = d.Name
			}
			res := Pool(parts...)
			mr.PerplexityResult = &PerplexityResult{Data: names, Tokens: res.Tokens, NLL: res.NLL, Perplexity: res.Perplexity,
				SeqLen: res.SeqLen, Stride: res.Stride, Windows: res.Windows, Bytes: res.Bytes}
			if !math.IsNaN(res.BitsPerByte) {
				mr.BitsPerByte = res.BitsPerByte
			}
		}
		if len(cfg.Tasks) > 0 {
			if m.Tok == nil {
				return nil, fmt.Errorf("eval: %s: tasks need a tokenizer", m.Name)
			}
			s, err := NewScorer(m.Model, m.Tok)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.Name, err)
			}
			for _, t := range cfg.Tasks {
				o := TaskOptions{Limit: cfg.Limit, Progress: cfg.Progress.Phase(m.Name + " " + t.Name)}
				r, err := s.Evaluate(ctx, t, o)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", m.Name, err)
				}
				mr.Tasks = append(mr.Tasks, *r)
			}
		}
		mr.Seconds = time.Since(t0).Seconds()
		rep.Models = append(rep.Models, mr)
	}
	return rep, nil
}

// WriteText prints the report: for one model a table of its results, for
// several a side-by-side table with one column per model (the first is
// usually the parent). Every accuracy has its standard error next to it;
// chance is the accuracy of a uniform guess.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"task", "metric", "items"}
	if len(r.Models) == 1 {
		header = append(header, "value", "± stderr", "chance")
		if r.Models[0].Params > 0 {
			fmt.Fprintf(tw, "%s (%s parameters)\n", r.Models[0].Model, thousands(r.Models[0].Params))
		} else { // imported results
			fmt.Fprintf(tw, "%s\n", r.Models[0].Model)
		}
	} else {
		for _, m := range r.Models {
			header = append(header, m.Model)
		}
		header = append(header, "chance")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	if len(r.Models) > 1 {
		row := []string{"parameters", "", ""}
		for _, m := range r.Models {
			row = append(row, thousands(m.Params))
		}
		fmt.Fprintln(tw, strings.Join(append(row, ""), "\t"))
	}
	if p := r.Models[0].PerplexityResult; p != nil {
		rows := [][2]string{{"perplexity", "%.3f"}}
		if p.Bytes > 0 {
			rows = append(rows, [2]string{"bits/byte", "%.4f"})
		}
		for _, rw := range rows {
			row := []string{strings.Join(p.Data, ", "), rw[0], fmt.Sprint(p.Tokens) + " tok"}
			for _, m := range r.Models {
				v := "-"
				if q := m.PerplexityResult; q != nil {
					x := q.Perplexity
					if rw[0] != "perplexity" {
						x = q.BitsPerByte
					}
					v = fmt.Sprintf(rw[1], x)
				}
				row = append(row, v)
			}
			if len(r.Models) == 1 {
				row = append(row, "")
			}
			fmt.Fprintln(tw, strings.Join(append(row, ""), "\t"))
		}
	}
	for i, t := range r.Models[0].Tasks {
		for _, met := range t.Metrics {
			row := []string{t.Task, met.Name, fmt.Sprint(t.Items)}
			for _, m := range r.Models {
				if i >= len(m.Tasks) {
					row = append(row, "-")
					continue
				}
				mm, _ := m.Tasks[i].Metric(met.Name)
				v := formatMetric(mm)
				if len(r.Models) == 1 {
					v = strings.Replace(v, " ± ", "\t± ", 1)
				}
				row = append(row, v)
			}
			chance := ""
			if t.Chance > 0 && met.Name != "perplexity" {
				chance = fmt.Sprintf("%.4f", t.Chance)
			}
			fmt.Fprintln(tw, strings.Join(append(row, chance), "\t"))
		}
	}
	return tw.Flush()
}

func formatMetric(m Metric) string {
	if m.Name == "perplexity" {
		return fmt.Sprintf("%.2f ± %.2f", m.Value, m.Stderr)
	}
	return fmt.Sprintf("%.4f ± %.4f", m.Value, m.Stderr)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

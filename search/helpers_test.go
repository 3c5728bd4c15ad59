package search

import (
	"context"
	"io/fs"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/workload"
)

func embedded(t testing.TB) *architecture.Model {
	t.Helper()
	b, err := fs.ReadFile(parent.FS(), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := architecture.FromConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func preset(t testing.TB, name string) *architecture.Model {
	t.Helper()
	m, err := architecture.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func gpu(t testing.TB, name string) *hardware.GPU {
	t.Helper()
	g, err := hardware.Default().Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func wl(t testing.TB, name string) *workload.Workload {
	t.Helper()
	w, err := workload.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return &w
}

// setup is one search problem.
type setup struct {
	parent *architecture.Model
	gpu    string
	engine estimate.Engine
	work   *workload.Workload
	space  SpaceOptions
	b      Budgets
}

func (s setup) run(t testing.TB, strategy string) (*Space, *Result, error) {
	t.Helper()
	so := s.space
	so.Engine = s.engine
	so.Concurrency = s.work.Concurrency
	so.MaxMemory = s.b.MaxMemory
	so.DeviceBytes = float64(gpu(t, s.gpu).MemoryBytes)
	if strategy == Minitron {
		so.Uniform = true
	}
	sp, err := NewSpace(s.parent, so)
	if err != nil {
		t.Fatal(err)
	}
	px, err := NewProxy(s.parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sp, px, Options{Strategy: strategy, GPU: gpu(t, s.gpu), Workload: s.work, Budgets: s.b})
	return sp, res, err
}

// parentCosts prices the parent with the engine defaults.
func parentCosts(t testing.TB, m *architecture.Model, g string, eng estimate.Engine, w *workload.Workload) Costs {
	t.Helper()
	c, err := estimate.Compile(gpu(t, g), eng, estimate.Options{}, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s estimate.Summary
	c.Summarize(&s, m)
	p := c.PriceSummary(&s)
	return costsOf(&p, &s)
}

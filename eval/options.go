package eval

import (
	"errors"
	"fmt"
	"strings"
)

// EnsureDefaults fills the unset (zero) fields and returns o. Stride keeps
// 0, which means packed windows.
func (o *Options) EnsureDefaults() *Options {
	if o.SeqLen == 0 {
		o.SeqLen = 128
	}
	if o.Batch == 0 {
		o.Batch = 8
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.SeqLen < 1:
		return fmt.Errorf("eval: window length %d: want at least 1 token", o.SeqLen)
	case o.Stride < 0:
		return fmt.Errorf("eval: stride %d: want >= 0 (0: packed windows)", o.Stride)
	case o.Batch < 1:
		return fmt.Errorf("eval: batch %d: want at least 1 window per forward pass", o.Batch)
	}
	return nil
}

// Validate reports the first invalid option.
func (o *TaskOptions) Validate() error {
	if o.Limit < 0 {
		return fmt.Errorf("eval: limit %d: want >= 0 items per group (0: all)", o.Limit)
	}
	return nil
}

// EnsureDefaults fills the windows' unset fields and returns c.
func (c *Config) EnsureDefaults() *Config {
	c.Windows.EnsureDefaults()
	return c
}

// Validate reports the first invalid option (after EnsureDefaults).
func (c *Config) Validate() error {
	if len(c.Data) == 0 && len(c.Tasks) == 0 {
		return errors.New("eval: nothing to measure: give data for perplexity or tasks")
	}
	if err := c.Windows.Validate(); err != nil {
		return err
	}
	if c.Limit < 0 {
		return fmt.Errorf("eval: limit %d: want >= 0 items per task group (0: all)", c.Limit)
	}
	return nil
}

// EnsureDefaults fills the unset fields and returns o: Seed 1 (nil; a
// pointer to 0 is seed 0), 200 cloze and 200 choice items, 48 words of
// context, 3 words per continuation, 4 choices per item.
func (o *SuiteOptions) EnsureDefaults() *SuiteOptions {
	if o.Seed == nil {
		seed := uint64(1)
		o.Seed = &seed
	}
	if o.Cloze == 0 {
		o.Cloze = 200
	}
	if o.Choice == 0 {
		o.Choice = 200
	}
	if o.ContextWords == 0 {
		o.ContextWords = 48
	}
	if o.ContWords == 0 {
		o.ContWords = 3
	}
	if o.Choices == 0 {
		o.Choices = 4
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *SuiteOptions) Validate() error {
	switch {
	case o.Seed == nil:
		return errors.New("eval: suite options not completed: call EnsureDefaults before Validate")
	case o.Cloze < 1 || o.Choice < 1:
		return fmt.Errorf("eval: %d cloze and %d choice items: want at least 1 of each", o.Cloze, o.Choice)
	case o.ContextWords < 1:
		return fmt.Errorf("eval: context words %d: want at least 1", o.ContextWords)
	case o.ContWords < 1:
		return fmt.Errorf("eval: continuation words %d: want at least 1", o.ContWords)
	case o.Choices < 2:
		return fmt.Errorf("eval: choices %d: want at least 2 per item (the true one and a wrong one)", o.Choices)
	}
	return nil
}

// Validate reports the first invalid option.
func (o *HarnessOptions) Validate() error {
	switch {
	case Suites[o.Suite] == nil:
		return &UnknownTaskError{Name: o.Suite}
	case o.Model == "" || o.Output == "":
		return errors.New("eval: the harness command needs the model and an output directory")
	case o.Limit < 0:
		return fmt.Errorf("eval: limit %d: want >= 0 items per task (0: all)", o.Limit)
	case o.Endpoint != "" && !strings.HasPrefix(o.Endpoint, "http://") && !strings.HasPrefix(o.Endpoint, "https://"):
		return fmt.Errorf("eval: endpoint %q: want an http:// or https:// URL of a completions endpoint (http://HOST:8000/v1/completions)", o.Endpoint)
	}
	return nil
}

// Package modelref resolves what a user writes after --model to a model:
// the one rule that every autocompress command taking --model follows.
//
// # The rule
//
// A --model value is, in this order:
//
//   - "parent": the embedded parent checkpoint (package parent), in every
//     command and from any working directory. A local directory that
//     happens to be called parent is written as a path, ./parent.
//   - an existing directory: a HuggingFace checkpoint directory holding
//     config.json (and, for commands that read weights, *.safetensors);
//   - an existing file: a config.json (a description only, no weights);
//   - a preset: a HuggingFace id whose config.json is embedded in package
//     architecture, or a model the estimator's ground truth describes
//     (architecture/published), e.g. meta-llama/Llama-3.1-8B-Instruct.
//
// Anything else is an *UnknownError listing Names. Presets and config files
// describe a model's shape only; commands that need weights ask for
// Checkpoint, which names what to give instead.
package modelref

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/parent"
)

// Parent is the --model value of the embedded parent checkpoint.
const Parent = "parent"

// Kind says what a --model value named.
type Kind int

const (
	KindParent     Kind = iota + 1 // the embedded parent checkpoint
	KindCheckpoint                 // a checkpoint directory
	KindConfig                     // a config.json file
	KindPreset                     // an embedded architecture preset
	KindShape                      // a model the ground truth describes
)

func (k Kind) String() string {
	switch k {
	case KindParent:
		return "embedded parent"
	case KindCheckpoint:
		return "checkpoint directory"
	case KindConfig:
		return "config file"
	case KindPreset:
		return "preset"
	case KindShape:
		return "ground-truth model"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Ref is a resolved --model value.
type Ref struct {
	Name string // the value as given
	Kind Kind
	// Path is the directory (KindCheckpoint) or file (KindConfig) named;
	// empty for the others (the parent's directory comes from Checkpoint).
	Path string
}

// UnknownError reports a --model value that is neither a path nor a known
// name. It is a usage error: the fix is another value.
type UnknownError struct {
	Name  string
	Known []string // Names()
	// Path is set when Name is written as a path (./x, /x, ~/x, x.json)
	// that does not exist.
	Path bool
}

func (e *UnknownError) Error() string { return e.Spell(nil) }

// Spell returns the message with the way to list the names spelled by
// spell("list-models") (a command's own, e.g. "autocompress inspect
// --model list"); nil gives the library's words (Error).
func (e *UnknownError) Spell(spell func(name string) string) string {
	list := "Names"
	if spell != nil {
		list = spell("list-models")
	}
	if e.Path {
		return fmt.Sprintf("model %s: no such file or directory (give an existing checkpoint directory or config.json, %q, or a preset: %s)", e.Name, Parent, list)
	}
	return fmt.Sprintf("unknown model %q: give a checkpoint directory, a config.json, %q for the embedded parent, or one of the presets (%s): %s",
		e.Name, Parent, list, strings.Join(e.Known, ", "))
}

// NoWeightsError reports a model named by its description only (a preset
// or a config.json) given to a command that reads weights.
type NoWeightsError struct {
	Name string
	Kind Kind
}

func (e *NoWeightsError) Error() string {
	return fmt.Sprintf("model %q is a %s, which describes a model but holds no weights: give a checkpoint directory (config.json and *.safetensors) or %q", e.Name, e.Kind, Parent)
}

// NotCheckpointError reports a directory given as --model that holds no
// config.json.
type NotCheckpointError struct{ Path string }

func (e *NotCheckpointError) Error() string {
	return fmt.Sprintf("model %s: not a checkpoint directory (no config.json): want a HuggingFace checkpoint directory with config.json and *.safetensors, or %q", e.Path, Parent)
}

// ErrEmpty is returned for an empty --model value.
var ErrEmpty = errors.New("no model given: give a checkpoint directory, a config.json, " + `"parent"` + " or a preset name")

// Names returns every name Resolve accepts that is not a path, sorted:
// "parent", the architecture presets and the ground-truth models.
func Names() []string {
	names := append([]string{Parent}, architecture.Presets()...)
	names = append(names, published.Known()...)
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}

// Resolve classifies a --model value (see the package comment). It touches
// the file system only to stat paths; nothing is loaded or extracted.
func Resolve(name string) (*Ref, error) {
	if name == "" {
		return nil, ErrEmpty
	}
	if name == Parent {
		return &Ref{Name: name, Kind: KindParent}, nil
	}
	if st, err := os.Stat(name); err == nil {
		if st.IsDir() {
			return &Ref{Name: name, Kind: KindCheckpoint, Path: name}, nil
		}
		return &Ref{Name: name, Kind: KindConfig, Path: name}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	if _, err := architecture.Preset(name); err == nil {
		return &Ref{Name: name, Kind: KindPreset}, nil
	}
	if _, ok := published.DescribePublished(name); ok {
		return &Ref{Name: name, Kind: KindShape}, nil
	}
	return nil, &UnknownError{Name: name, Known: Names(), Path: looksLikePath(name)}
}

func looksLikePath(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~") || filepath.IsAbs(name) ||
		strings.HasSuffix(name, ".json") || strings.Count(name, "/") > 1
}

// Arch returns the model's description.
func (r *Ref) Arch() (*architecture.Model, error) {
	switch r.Kind {
	case KindParent:
		d, err := r.Checkpoint()
		if err != nil {
			return nil, err
		}
		m, err := architecture.Load(d)
		if err != nil {
			return nil, err
		}
		m.Name = Parent
		return m, nil
	case KindCheckpoint:
		if _, err := r.Checkpoint(); err != nil {
			return nil, err
		}
		return architecture.Load(r.Path)
	case KindConfig:
		return architecture.Load(r.Path)
	case KindPreset:
		m, err := architecture.Preset(r.Name)
		if err != nil {
			return nil, err
		}
		if m.Name == "" {
			m.Name = r.Name
		}
		return m, nil
	case KindShape:
		m, ok := published.DescribePublished(r.Name)
		if !ok {
			return nil, &UnknownError{Name: r.Name, Known: Names()}
		}
		return m, nil
	}
	return nil, fmt.Errorf("modelref: unresolved model %q", r.Name)
}

// Checkpoint returns the directory holding the model's config.json and
// weights, extracting the embedded parent on first use. A preset or a
// config.json is a *NoWeightsError; a directory without config.json is an
// error saying so.
func (r *Ref) Checkpoint() (string, error) {
	switch r.Kind {
	case KindParent:
		d, err := parent.Dir()
		if err != nil {
			return "", fmt.Errorf("extracting the embedded parent: %w", err)
		}
		return d, nil
	case KindCheckpoint:
		if _, err := os.Stat(filepath.Join(r.Path, "config.json")); err != nil {
			return "", &NotCheckpointError{Path: r.Path}
		}
		return r.Path, nil
	}
	return "", &NoWeightsError{Name: r.Name, Kind: r.Kind}
}

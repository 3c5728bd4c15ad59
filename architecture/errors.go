package architecture

import (
	"fmt"
	"strings"
)

// ConfigError reports a config.json that cannot be read: invalid JSON, a
// missing required field, or a field of the wrong type or value. Key is the
// JSON path of the field ("hidden_size", "block_configs[3].ffn.ffn_mult"),
// empty for document-level problems.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "config.json: " + e.Msg
	}
	return fmt.Sprintf("config.json: %q: %s", e.Key, e.Msg)
}

// MissingFieldError reports a required config.json field that is absent or
// null. Its message reads `config.json: missing "hidden_size"`.
type MissingFieldError struct {
	Key string
}

func (e *MissingFieldError) Error() string {
	return fmt.Sprintf("config.json: missing %q", e.Key)
}

// UnsupportedArchError reports a config.json whose architecture autocompress
// does not model. The message lists the supported architectures.
type UnsupportedArchError struct {
	Arch string
	// Reason is set when the architecture is known but a feature of this
	// config is not (e.g. replace_with_linear in DeciLM block_configs).
	Reason string
}

func (e *UnsupportedArchError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("architecture %s: %s", e.Arch, e.Reason)
	}
	arch := e.Arch
	if arch == "" {
		arch = "(none: config.json has no \"architectures\" nor a known \"model_type\")"
	}
	return fmt.Sprintf("unsupported architecture %s; supported: %s", arch, strings.Join(Supported(), ", "))
}

// ValidationError lists what is inconsistent in a Model. Layer is -1 for
// global problems.
type ValidationError struct {
	Layer int
	Msg   string
}

func (e *ValidationError) Error() string {
	if e.Layer < 0 {
		return "invalid model: " + e.Msg
	}
	return fmt.Sprintf("invalid model: layer %d: %s", e.Layer, e.Msg)
}

// FormatError reports a Model that cannot be written in the requested config
// format, saying why (e.g. per-layer query heads in DeciLM).
type FormatError struct {
	Format Format
	Layer  int // -1 when not specific to a layer
	Msg    string
}

func (e *FormatError) Error() string {
	if e.Layer < 0 {
		return fmt.Sprintf("cannot write %s config: %s", e.Format, e.Msg)
	}
	return fmt.Sprintf("cannot write %s config: layer %d: %s", e.Format, e.Layer, e.Msg)
}

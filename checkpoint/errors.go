package checkpoint

import (
	"errors"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/internal/output"
)

// FormatError reports a malformed checkpoint: a safetensors header or data
// layout that breaks the format, or an index that does not match its shards.
// Error names the file, the tensor (when one is involved) and the byte offset
// in the file where the problem was found.
type FormatError struct {
	File   string // the file being read
	Tensor string // the tensor involved, or ""
	Offset int64  // byte offset in File (for headers: where the tensor's entry starts)
	Msg    string // what is wrong
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Msg)
	fmt.Fprintf(&b, " (at byte offset %d)", e.Offset)
	return b.String()
}

// ErrNotFound is returned (wrapped) when a tensor name is not in the checkpoint.
var ErrNotFound = errors.New("tensor not found")

// ErrUnsupported is returned (wrapped) when a conversion is asked of a dtype
// that does not support it, e.g. Float32 of an I64 tensor.
var ErrUnsupported = errors.New("unsupported")

// ExistsError is returned by NewOutputDir and Create when the destination
// already exists and overwriting was not asked for.
type ExistsError = output.ExistsError

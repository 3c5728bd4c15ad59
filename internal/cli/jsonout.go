package cli

import (
	"encoding/json"
	"io"
)

// writeJSON is the one writer of --json output: a named struct (never a
// map, so the keys are documented and stable), indented by two spaces, with
// "<", ">" and "&" kept as written, ending in a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

package tokenizer

import (
	"fmt"
	"strings"
)

// UnsupportedError reports a tokenizer.json component this package does not
// implement.
type UnsupportedError struct {
	Component string   // "model", "normalizer", "pre_tokenizer", "decoder", "post_processor", or a field
	Kind      string   // the "type" found in the file, or the field value
	Supported []string // what is supported instead, if a list applies
}

func (e *UnsupportedError) Error() string {
	msg := fmt.Sprintf("tokenizer: unsupported %s %q", e.Component, e.Kind)
	if len(e.Supported) > 0 {
		msg += " (supported: " + strings.Join(e.Supported, ", ") + ")"
	}
	return msg
}

// FormatError reports a malformed tokenizer.json or token-id file.
type FormatError struct {
	Where string // e.g. "model.merges[12]", "line 3", "byte 16"
	Msg   string
}

func (e *FormatError) Error() string {
	if e.Where == "" {
		return "tokenizer: " + e.Msg
	}
	return "tokenizer: " + e.Where + ": " + e.Msg
}

// InvalidUTF8Error reports text that is not valid UTF-8.
type InvalidUTF8Error struct {
	Offset int  // byte offset of the first invalid byte
	Byte   byte // its value
}

func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("tokenizer: input text is not valid UTF-8: byte %#02x at byte offset %d (convert the text to UTF-8, e.g. with iconv)", e.Byte, e.Offset)
}

// UnknownIDError reports a token id outside the vocabulary.
type UnknownIDError struct {
	ID        int
	Index     int // position in the id sequence
	VocabSize int
}

func (e *UnknownIDError) Error() string {
	return fmt.Sprintf("tokenizer: token id %d at position %d is outside the vocabulary (size %d); were the ids made with another tokenizer?", e.ID, e.Index, e.VocabSize)
}

package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// A normalizer rewrites text before pre-tokenization.
type normalizer interface {
	normalize(s string) string
}

type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string) string { return n.form.String(s) }

type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(s string) string { return strings.ToLower(s) }

// prependNormalizer prepends a string to non-empty text.
type prependNormalizer struct{ prepend string }

func (n prependNormalizer) normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prepend + s
}

// replaceNormalizer replaces every match of a pattern.
type replaceNormalizer struct {
	pat     *pattern
	content string
}

func (n replaceNormalizer) normalize(s string) string { return n.pat.replaceAll(s, n.content) }

// stripNormalizer removes leading and/or trailing whitespace.
type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, isWhitespace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, isWhitespace)
	}
	return s
}

type sequenceNormalizer []normalizer

func (seq sequenceNormalizer) normalize(s string) string {
	for _, n := range seq {
		s = n.normalize(s)
	}
	return s
}

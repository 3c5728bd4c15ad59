package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

var (
	supportedModels        = []string{"BPE"}
	supportedNormalizers   = []string{"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Prepend", "Replace", "Strip", "Sequence"}
	supportedPreTokenizers = []string{"ByteLevel", "Split", "Metaspace", "Digits", "Whitespace", "WhitespaceSplit", "Punctuation", "BertPreTokenizer", "Sequence"}
	supportedDecoders      = []string{"ByteLevel", "Metaspace", "ByteFallback", "Fuse", "Strip", "Replace", "Sequence"}
	supportedProcessors    = []string{"TemplateProcessing", "ByteLevel", "RobertaProcessing", "BertProcessing", "Sequence"}
)

// fileJSON is the top level of tokenizer.json.
type fileJSON struct {
	AddedTokens   []*AddedToken   `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

// componentJSON holds the fields of every component kind we read.
type componentJSON struct {
	Type string `json:"type"`

	// Sequences.
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`

	// Normalizers, pre-tokenizers and decoders.
	Prepend          string          `json:"prepend"`
	Pattern          json.RawMessage `json:"pattern"`
	Content          json.RawMessage `json:"content"` // a string for Replace, a char for Strip
	StripLeft        *bool           `json:"strip_left"`
	StripRight       *bool           `json:"strip_right"`
	AddPrefixSpace   *bool           `json:"add_prefix_space"`
	UseRegex         *bool           `json:"use_regex"`
	Behavior         string          `json:"behavior"`
	Invert           bool            `json:"invert"`
	Replacement      string          `json:"replacement"`
	PrependScheme    string          `json:"prepend_scheme"`
	Split            *bool           `json:"split"`
	IndividualDigits bool            `json:"individual_digits"`
	Start            int             `json:"start"`
	Stop             int             `json:"stop"`

	// Post-processors.
	Single        []json.RawMessage           `json:"single"`
	SpecialTokens map[string]specialTokenJSON `json:"special_tokens"`
	Sep           []json.RawMessage           `json:"sep"`
	Cls           []json.RawMessage           `json:"cls"`
}

type specialTokenJSON struct {
	ID     string   `json:"id"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens"`
}

// modelJSON is the "model" object.
type modelJSON struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Dropout                 *float64        `json:"dropout"`
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// jsonError turns an encoding/json error into a *FormatError with the byte
// offset when there is one.
func jsonError(where string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &FormatError{Where: fmt.Sprintf("%s: byte %d", where, se.Offset), Msg: "invalid JSON: " + se.Error()}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &FormatError{Where: fmt.Sprintf("%s: byte %d", where, te.Offset), Msg: fmt.Sprintf("field %q: expected %s, found JSON %s", te.Field, te.Type, te.Value)}
	}
	return &FormatError{Where: where, Msg: "invalid JSON: " + err.Error()}
}

func parseComponent(raw json.RawMessage, where string) (*componentJSON, error) {
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, jsonError(where, err)
	}
	return &c, nil
}

// parsePattern reads {"String": s} or {"Regex": r}.
func parsePattern(raw json.RawMessage, where string) (*pattern, error) {
	var p struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	}
	if isNull(raw) {
		return nil, &FormatError{Where: where, Msg: `missing "pattern"`}
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, jsonError(where, err)
	}
	switch {
	case p.String != nil:
		return &pattern{literal: *p.String, source: *p.String}, nil
	case p.Regex != nil:
		pat, err := compileRegex(*p.Regex)
		if err != nil {
			return nil, &FormatError{Where: where, Msg: err.Error()}
		}
		return pat, nil
	}
	return nil, &FormatError{Where: where, Msg: `"pattern" must be {"String": ...} or {"Regex": ...}`}
}

func jsonString(raw json.RawMessage, where, field string) (string, error) {
	var s string
	if isNull(raw) {
		return "", nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &FormatError{Where: where, Msg: fmt.Sprintf("%q must be a string", field)}
	}
	return s, nil
}

// maxDepth bounds nested Sequence components.
const maxDepth = 16

func parseNormalizer(raw json.RawMessage, where string, depth int) (normalizer, error) {
	if depth > maxDepth {
		return nil, &FormatError{Where: where, Msg: "Sequence nested too deeply"}
	}
	c, err := parseComponent(raw, where)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return unicodeNormalizer{norm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{norm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{norm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "Prepend":
		return prependNormalizer{c.Prepend}, nil
	case "Replace":
		pat, err := parsePattern(c.Pattern, where+".pattern")
		if err != nil {
			return nil, err
		}
		content, err := jsonString(c.Content, where, "content")
		if err != nil {
			return nil, err
		}
		return replaceNormalizer{pat, content}, nil
	case "Strip":
		return stripNormalizer{left: c.StripLeft == nil || *c.StripLeft, right: c.StripRight == nil || *c.StripRight}, nil
	case "Sequence":
		var seq sequenceNormalizer
		for i, r := range c.Normalizers {
			n, err := parseNormalizer(r, fmt.Sprintf("%s.normalizers[%d]", where, i), depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, n)
		}
		return seq, nil
	}
	return nil, &UnsupportedError{Component: where + " type", Kind: c.Type, Supported: supportedNormalizers}
}

func parseBehavior(s, where string, def splitBehavior) (splitBehavior, error) {
	if s == "" {
		return def, nil
	}
	b, ok := behaviorNames[s]
	if !ok {
		return 0, &UnsupportedError{Component: where + ".behavior", Kind: s, Supported: []string{"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"}}
	}
	return b, nil
}

func parseScheme(c *componentJSON, where string) (prependScheme, error) {
	switch c.PrependScheme {
	case "always":
		return prependAlways, nil
	case "first":
		return prependFirst, nil
	case "never":
		return prependNever, nil
	case "":
		// Files older than tokenizers 0.14 have add_prefix_space instead.
		if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			return prependNever, nil
		}
		return prependAlways, nil
	}
	return 0, &UnsupportedError{Component: where + ".prepend_scheme", Kind: c.PrependScheme, Supported: []string{"first", "always", "never"}}
}

func parseReplacement(c *componentJSON, where string) (rune, error) {
	if c.Replacement == "" {
		return '▁', nil
	}
	r, n := utf8.DecodeRuneInString(c.Replacement)
	if n != len(c.Replacement) {
		return 0, &FormatError{Where: where, Msg: fmt.Sprintf("replacement %q must be a single character", c.Replacement)}
	}
	return r, nil
}

func parsePreTokenizer(raw json.RawMessage, where string, depth int) (preTokenizer, error) {
	if depth > maxDepth {
		return nil, &FormatError{Where: where, Msg: "Sequence nested too deeply"}
	}
	c, err := parseComponent(raw, where)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		t := &byteLevelPreTokenizer{
			addPrefixSpace: c.AddPrefixSpace == nil || *c.AddPrefixSpace,
			useRegex:       c.UseRegex == nil || *c.UseRegex,
		}
		if t.useRegex {
			if t.split, err = compileRegex(gpt2SplitPattern); err != nil {
				return nil, err
			}
		}
		return t, nil
	case "Split":
		pat, err := parsePattern(c.Pattern, where+".pattern")
		if err != nil {
			return nil, err
		}
		b, err := parseBehavior(c.Behavior, where, behaviorIsolated)
		if err != nil {
			return nil, err
		}
		return &splitPreTokenizer{pat: pat, behavior: b, invert: c.Invert}, nil
	case "Metaspace":
		r, err := parseReplacement(c, where)
		if err != nil {
			return nil, err
		}
		scheme, err := parseScheme(c, where)
		if err != nil {
			return nil, err
		}
		return &metaspacePreTokenizer{replacement: r, scheme: scheme, split: c.Split == nil || *c.Split}, nil
	case "Digits":
		return &runeClassPreTokenizer{class: isDigit, behavior: behaviorIsolated, each: c.IndividualDigits}, nil
	case "Punctuation":
		b, err := parseBehavior(c.Behavior, where, behaviorIsolated)
		if err != nil {
			return nil, err
		}
		return &runeClassPreTokenizer{class: isPunctuation, behavior: b, each: true}, nil
	case "WhitespaceSplit":
		return &runeClassPreTokenizer{class: isWhitespace, behavior: behaviorRemoved}, nil
	case "Whitespace":
		pat, err := compileRegex(`\w+|[^\w\s]+`)
		if err != nil {
			return nil, err
		}
		return &splitPreTokenizer{pat: pat, behavior: behaviorRemoved, invert: true}, nil
	case "BertPreTokenizer":
		return sequencePreTokenizer{
			&runeClassPreTokenizer{class: isWhitespace, behavior: behaviorRemoved},
			&runeClassPreTokenizer{class: isPunctuation, behavior: behaviorIsolated, each: true},
		}, nil
	case "Sequence":
		var seq sequencePreTokenizer
		for i, r := range c.PreTokenizers {
			t, err := parsePreTokenizer(r, fmt.Sprintf("%s.pretokenizers[%d]", where, i), depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, t)
		}
		return seq, nil
	}
	return nil, &UnsupportedError{Component: where + " type", Kind: c.Type, Supported: supportedPreTokenizers}
}

func parseDecoder(raw json.RawMessage, where string, depth int) (decoder, error) {
	if depth > maxDepth {
		return nil, &FormatError{Where: where, Msg: "Sequence nested too deeply"}
	}
	c, err := parseComponent(raw, where)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return byteLevelDecoder{}, nil
	case "Metaspace":
		r, err := parseReplacement(c, where)
		if err != nil {
			return nil, err
		}
		scheme, err := parseScheme(c, where)
		if err != nil {
			return nil, err
		}
		return metaspaceDecoder{replacement: r, scheme: scheme}, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		content, err := jsonString(c.Content, where, "content")
		if err != nil {
			return nil, err
		}
		r, n := utf8.DecodeRuneInString(content)
		if n == 0 || n != len(content) {
			return nil, &FormatError{Where: where, Msg: fmt.Sprintf("Strip content %q must be a single character", content)}
		}
		if c.Start < 0 || c.Stop < 0 {
			return nil, &FormatError{Where: where, Msg: "Strip start and stop must not be negative"}
		}
		return stripDecoder{content: r, start: c.Start, stop: c.Stop}, nil
	case "Replace":
		pat, err := parsePattern(c.Pattern, where+".pattern")
		if err != nil {
			return nil, err
		}
		content, err := jsonString(c.Content, where, "content")
		if err != nil {
			return nil, err
		}
		return replaceDecoder{pat, content}, nil
	case "Sequence":
		var seq sequenceDecoder
		for i, r := range c.Decoders {
			d, err := parseDecoder(r, fmt.Sprintf("%s.decoders[%d]", where, i), depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, d)
		}
		return seq, nil
	}
	return nil, &UnsupportedError{Component: where + " type", Kind: c.Type, Supported: supportedDecoders}
}

// parsePair reads a RobertaProcessing/BertProcessing ["token", id] pair.
func parsePair(raw []json.RawMessage, where string) (int, error) {
	if len(raw) != 2 {
		return 0, &FormatError{Where: where, Msg: `expected ["token", id]`}
	}
	var id int
	if err := json.Unmarshal(raw[1], &id); err != nil {
		return 0, &FormatError{Where: where, Msg: `expected ["token", id]`}
	}
	return id, nil
}

func parsePostProcessor(raw json.RawMessage, where string, depth int) (postProcessor, error) {
	if depth > maxDepth {
		return nil, &FormatError{Where: where, Msg: "Sequence nested too deeply"}
	}
	c, err := parseComponent(raw, where)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return &templateProcessor{}, nil
	case "RobertaProcessing", "BertProcessing":
		cls, err := parsePair(c.Cls, where+".cls")
		if err != nil {
			return nil, err
		}
		sep, err := parsePair(c.Sep, where+".sep")
		if err != nil {
			return nil, err
		}
		return &templateProcessor{before: []int{cls}, after: []int{sep}}, nil
	case "TemplateProcessing":
		t := &templateProcessor{}
		seen := false
		for i, item := range c.Single {
			var it struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			}
			w := fmt.Sprintf("%s.single[%d]", where, i)
			if err := json.Unmarshal(item, &it); err != nil {
				return nil, jsonError(w, err)
			}
			switch {
			case it.Sequence != nil:
				if seen {
					return nil, &FormatError{Where: w, Msg: "the single template has two sequences"}
				}
				seen = true
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, &FormatError{Where: w, Msg: fmt.Sprintf("special token %q is not in special_tokens", it.SpecialToken.ID)}
				}
				if seen {
					t.after = append(t.after, st.IDs...)
				} else {
					t.before = append(t.before, st.IDs...)
				}
			default:
				return nil, &FormatError{Where: w, Msg: `expected {"SpecialToken": ...} or {"Sequence": ...}`}
			}
		}
		if !seen && len(c.Single) > 0 {
			return nil, &FormatError{Where: where + ".single", Msg: "the single template has no sequence"}
		}
		return t, nil
	case "Sequence":
		var seq sequenceProcessor
		for i, r := range c.Processors {
			p, err := parsePostProcessor(r, fmt.Sprintf("%s.processors[%d]", where, i), depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, p)
		}
		return seq, nil
	}
	return nil, &UnsupportedError{Component: where + " type", Kind: c.Type, Supported: supportedProcessors}
}

// parseModel reads a BPE model.
func parseModel(raw json.RawMessage) (*bpeModel, []string, error) {
	if isNull(raw) {
		return nil, nil, &FormatError{Where: "model", Msg: "missing"}
	}
	var mj modelJSON
	if err := json.Unmarshal(raw, &mj); err != nil {
		return nil, nil, jsonError("model", err)
	}
	if mj.Type == "" && !isNull(mj.Merges) {
		mj.Type = "BPE" // old files omit the type
	}
	if mj.Type != "BPE" {
		return nil, nil, &UnsupportedError{Component: "model type", Kind: mj.Type, Supported: supportedModels}
	}
	if mj.Dropout != nil && *mj.Dropout != 0 {
		// Dropout makes encoding random; it is a training-time option.
		return nil, nil, &UnsupportedError{Component: "model.dropout", Kind: fmt.Sprint(*mj.Dropout), Supported: []string{"null", "0"}}
	}
	if mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "" {
		return nil, nil, &UnsupportedError{Component: "model.continuing_subword_prefix", Kind: *mj.ContinuingSubwordPrefix, Supported: []string{`"" or null`}}
	}
	if mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "" {
		return nil, nil, &UnsupportedError{Component: "model.end_of_word_suffix", Kind: *mj.EndOfWordSuffix, Supported: []string{`"" or null`}}
	}
	var vocab map[string]int
	if isNull(mj.Vocab) {
		return nil, nil, &FormatError{Where: "model.vocab", Msg: "missing"}
	}
	if err := json.Unmarshal(mj.Vocab, &vocab); err != nil {
		return nil, nil, jsonError("model.vocab", err)
	}
	m := &bpeModel{
		vocab:        make(map[string]int32, len(vocab)),
		merges:       map[uint64]mergeInfo{},
		unkID:        -1,
		fuseUnk:      mj.FuseUnk,
		byteFallback: mj.ByteFallback,
		ignoreMerges: mj.IgnoreMerges,
		cache:        map[string][]int32{},
	}
	maxID := -1
	for tok, id := range vocab {
		if tok == "" {
			return nil, nil, &FormatError{Where: "model.vocab", Msg: fmt.Sprintf("empty token string (id %d)", id)}
		}
		if id < 0 || id >= maxVocab {
			return nil, nil, &FormatError{Where: "model.vocab", Msg: fmt.Sprintf("token %q has id %d outside [0, %d)", tok, id, maxVocab)}
		}
		m.vocab[tok] = int32(id)
		maxID = max(maxID, id)
	}
	idToToken := make([]string, maxID+1)
	for tok, id := range vocab {
		if idToToken[id] != "" {
			return nil, nil, &FormatError{Where: "model.vocab", Msg: fmt.Sprintf("id %d is used by both %q and %q", id, idToToken[id], tok)}
		}
		idToToken[id] = tok
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}
	if mj.UnkToken != nil {
		id, ok := m.vocab[*mj.UnkToken]
		if !ok {
			return nil, nil, &FormatError{Where: "model.unk_token", Msg: fmt.Sprintf("unk_token %q is not in the vocabulary", *mj.UnkToken)}
		}
		m.unkID = id
	}
	pairs, err := parseMerges(mj.Merges)
	if err != nil {
		return nil, nil, err
	}
	for i, p := range pairs {
		where := fmt.Sprintf("model.merges[%d]", i)
		a, b := p[0], p[1]
		ida, ok := m.vocab[a]
		if !ok {
			return nil, nil, &FormatError{Where: where, Msg: fmt.Sprintf("merge %q %q: token %q is not in the vocabulary", a, b, a)}
		}
		idb, ok := m.vocab[b]
		if !ok {
			return nil, nil, &FormatError{Where: where, Msg: fmt.Sprintf("merge %q %q: token %q is not in the vocabulary", a, b, b)}
		}
		idm, ok := m.vocab[a+b]
		if !ok {
			return nil, nil, &FormatError{Where: where, Msg: fmt.Sprintf("merge %q %q: merged token %q is not in the vocabulary", a, b, a+b)}
		}
		// A repeated merge takes the later rank, as in the HuggingFace
		// library (its merge map is collected in order).
		m.merges[mergeKey(ida, idb)] = mergeInfo{rank: int32(i), id: idm}
	}
	return m, idToToken, nil
}

// maxVocab bounds token ids so that a corrupt file cannot make us allocate
// an enormous table.
const maxVocab = 1 << 22

// parseMerges reads the merges, all "a b" strings or all ["a", "b"] pairs
// (the fast paths), or a mixture.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, &FormatError{Where: fmt.Sprintf("model.merges[%d]", i), Msg: fmt.Sprintf("merge %q must be two tokens separated by one space", s)}
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var lists [][]string
	if json.Unmarshal(raw, &lists) == nil {
		out := make([][2]string, len(lists))
		for i, l := range lists {
			if len(l) != 2 {
				return nil, &FormatError{Where: fmt.Sprintf("model.merges[%d]", i), Msg: fmt.Sprintf(`merge %q must be two tokens ["a", "b"]`, l)}
			}
			out[i] = [2]string{l[0], l[1]}
		}
		return out, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, jsonError("model.merges", err)
	}
	out := make([][2]string, len(items))
	for i, it := range items {
		a, b, err := parseMerge(it, fmt.Sprintf("model.merges[%d]", i))
		if err != nil {
			return nil, err
		}
		out[i] = [2]string{a, b}
	}
	return out, nil
}

func parseMerge(raw json.RawMessage, where string) (string, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "", jsonError(where, err)
		}
		parts := strings.Split(s, " ")
		if len(parts) != 2 {
			return "", "", &FormatError{Where: where, Msg: fmt.Sprintf("merge %q must be two tokens separated by one space", s)}
		}
		return parts[0], parts[1], nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", &FormatError{Where: where, Msg: `merge must be "a b" or ["a", "b"]`}
	}
	return pair[0], pair[1], nil
}

package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and decodes ids to text. It is safe
// for concurrent use.
type Tokenizer struct {
	model      *bpeModel
	normalizer normalizer    // nil: none
	pre        preTokenizer  // nil: the whole text is one piece
	decoder    decoder       // nil: tokens joined by spaces
	post       postProcessor // nil: nothing added

	added     []*AddedToken
	rawAdded  *addedMatcher // added tokens matched in the raw text
	normAdded *addedMatcher // added tokens matched in normalized text
	idToToken []string
	tokenToID map[string]int
	special   map[int]bool
	bos, eos  int
	vocabSize int
}

// Load reads a tokenizer.json file. If path is a directory, its
// tokenizer.json is read. A tokenizer_config.json beside it, when present,
// supplies the BOS and EOS tokens.
func Load(path string) (*Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %s does not exist (give the path of a HuggingFace tokenizer.json or the model directory holding one): %w", path, err)
		}
		return nil, fmt.Errorf("tokenizer: reading %s: %w", path, err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	if data, err := os.ReadFile(cfg); err == nil {
		t.applyConfig(data)
	}
	return t, nil
}

// Parse reads the contents of a tokenizer.json file.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, jsonError("tokenizer.json", err)
	}
	model, idToToken, err := parseModel(f.Model)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{model: model, idToToken: idToToken, bos: -1, eos: -1, special: map[int]bool{}}
	if !isNull(f.Normalizer) {
		if t.normalizer, err = parseNormalizer(f.Normalizer, "normalizer", 0); err != nil {
			return nil, err
		}
	}
	if !isNull(f.PreTokenizer) {
		if t.pre, err = parsePreTokenizer(f.PreTokenizer, "pre_tokenizer", 0); err != nil {
			return nil, err
		}
	}
	if !isNull(f.Decoder) {
		if t.decoder, err = parseDecoder(f.Decoder, "decoder", 0); err != nil {
			return nil, err
		}
	}
	if !isNull(f.PostProcessor) {
		if t.post, err = parsePostProcessor(f.PostProcessor, "post_processor", 0); err != nil {
			return nil, err
		}
	}
	// Added tokens extend (or override) the model vocabulary.
	var raw, norm []*AddedToken
	var rawC, normC []string
	for i, a := range f.AddedTokens {
		if a == nil {
			return nil, &FormatError{Where: fmt.Sprintf("added_tokens[%d]", i), Msg: "null entry"}
		}
		if a.ID < 0 || a.ID >= maxVocab {
			return nil, &FormatError{Where: fmt.Sprintf("added_tokens[%d]", i), Msg: fmt.Sprintf("id %d outside [0, %d)", a.ID, maxVocab)}
		}
		if a.Content == "" {
			return nil, &FormatError{Where: fmt.Sprintf("added_tokens[%d]", i), Msg: "empty content"}
		}
		for a.ID >= len(t.idToToken) {
			t.idToToken = append(t.idToToken, "")
		}
		t.idToToken[a.ID] = a.Content
		if a.Special {
			t.special[a.ID] = true
		}
		t.added = append(t.added, a)
		if a.Normalized && t.normalizer != nil {
			norm = append(norm, a)
			normC = append(normC, t.normalizer.normalize(a.Content))
		} else {
			raw = append(raw, a)
			rawC = append(rawC, a.Content)
		}
	}
	if len(raw) > 0 {
		t.rawAdded = newAddedMatcher(raw, rawC)
	}
	if len(norm) > 0 {
		t.normAdded = newAddedMatcher(norm, normC)
	}
	t.vocabSize = len(t.idToToken)
	model.setChunking('▁')
	t.tokenToID = make(map[string]int, len(t.idToToken))
	for tok, id := range model.vocab {
		t.tokenToID[tok] = int(id)
	}
	for _, a := range t.added {
		t.tokenToID[a.Content] = a.ID
	}
	if t.post != nil {
		before, after := t.post.bounds()
		for _, id := range append(slices.Clone(before), after...) {
			if _, ok := t.Token(id); !ok {
				return nil, &FormatError{Where: "post_processor", Msg: fmt.Sprintf("special token id %d is not in the vocabulary", id)}
			}
		}
		if len(before) > 0 {
			t.bos = before[0]
		}
		if len(after) > 0 {
			t.eos = after[len(after)-1]
		}
	}
	for _, a := range t.added {
		switch a.Content {
		case "<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>":
			if t.bos < 0 {
				t.bos = a.ID
			}
		case "</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>":
			if t.eos < 0 {
				t.eos = a.ID
			}
		}
	}
	return t, nil
}

// applyConfig takes bos_token and eos_token from a tokenizer_config.json;
// malformed files are ignored (the tokenizer.json is authoritative).
func (t *Tokenizer) applyConfig(data []byte) {
	var cfg struct {
		BOS json.RawMessage `json:"bos_token"`
		EOS json.RawMessage `json:"eos_token"`
	}
	if json.Unmarshal(data, &cfg) != nil {
		return
	}
	name := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var o struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(raw, &o) == nil {
			return o.Content
		}
		return ""
	}
	if id, ok := t.TokenID(name(cfg.BOS)); ok {
		t.bos = id
	}
	if id, ok := t.TokenID(name(cfg.EOS)); ok {
		t.eos = id
	}
}

// VocabSize is one more than the largest token id (model vocabulary and
// added tokens).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token string (as written in the vocabulary,
// e.g. "Ġthe" for a byte-level BPE).
func (t *Tokenizer) TokenID(s string) (int, bool) {
	id, ok := t.tokenToID[s]
	return id, ok
}

// Token returns the string of a token id, or "" and false when the id is
// unused.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.idToToken) || t.idToToken[id] == "" {
		return "", false
	}
	return t.idToToken[id], true
}

// BOS returns the beginning-of-sequence id, when known.
func (t *Tokenizer) BOS() (int, bool) { return t.bos, t.bos >= 0 }

// EOS returns the end-of-sequence id, when known.
func (t *Tokenizer) EOS() (int, bool) { return t.eos, t.eos >= 0 }

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool { return t.special[id] }

// AddedTokens returns the added tokens in file order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, len(t.added))
	for i, a := range t.added {
		out[i] = *a
	}
	return out
}

// checkUTF8 returns an *InvalidUTF8Error for the first invalid byte of s.
func checkUTF8(s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return &InvalidUTF8Error{Offset: i, Byte: s[i]}
		}
		i += n
	}
	return nil
}

// Encode turns text into token ids. With addSpecial, the post-processor's
// special tokens (e.g. BOS) are added. Text must be valid UTF-8.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int, error) {
	return t.EncodeContext(context.Background(), text, addSpecial)
}

// EncodeContext is Encode that stops with ctx's error when ctx is cancelled
// (checked every few hundred pre-tokenized pieces, so a whole book stops
// within milliseconds).
func (t *Tokenizer) EncodeContext(ctx context.Context, text string, addSpecial bool) ([]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkUTF8(text); err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(text)/3+4)
	for _, seg := range t.rawAdded.split(text, true) {
		if seg.id >= 0 {
			ids = append(ids, seg.id)
			continue
		}
		s := seg.text
		if t.normalizer != nil {
			s = t.normalizer.normalize(s)
		}
		for _, seg2 := range t.normAdded.split(s, seg.atStart) {
			if seg2.id >= 0 {
				ids = append(ids, seg2.id)
				continue
			}
			var err error
			if ids, err = t.encodePieces(ctx, seg2, ids); err != nil {
				return nil, err
			}
		}
	}
	if addSpecial && t.post != nil {
		ids = t.post.process(ids)
	}
	return ids, nil
}

// EncodeAll encodes many texts on all CPUs; out[i] holds the ids of
// texts[i]. The first error (by index) is returned, naming the text.
func (t *Tokenizer) EncodeAll(texts []string, addSpecial bool) ([][]int, error) {
	out := make([][]int, len(texts))
	errs := make([]error, len(texts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(texts)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(texts) {
					return
				}
				out[i], errs[i] = t.Encode(texts[i], addSpecial)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
	}
	return out, nil
}

func (t *Tokenizer) encodePieces(ctx context.Context, seg segment, ids []int) ([]int, error) {
	ps := []piece{{text: seg.text, atStart: seg.atStart}}
	if t.pre != nil {
		var err error
		if ps, err = t.pre.preTokenize(ps); err != nil {
			return nil, err
		}
	}
	for i, p := range ps {
		if i%256 == 255 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		var err error
		if ids, err = t.model.encode(p.text, ids); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Decode turns token ids back into text; with skipSpecial, special added
// tokens are left out. Byte sequences that are not valid UTF-8 decode to
// U+FFFD.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) (string, error) {
	tokens := make([]string, 0, len(ids))
	for i, id := range ids {
		if id < 0 || id >= len(t.idToToken) || t.idToToken[id] == "" {
			return "", &UnknownIDError{ID: id, Index: i, VocabSize: t.vocabSize}
		}
		if skipSpecial && t.special[id] {
			continue
		}
		tokens = append(tokens, t.idToToken[id])
	}
	if t.decoder == nil {
		return strings.Join(tokens, " "), nil
	}
	return strings.Join(t.decoder.decodeChain(tokens), ""), nil
}

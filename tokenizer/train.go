package tokenizer

// This file trains a byte-level BPE vocabulary (GPT-2 style) and writes it as
// a HuggingFace tokenizer.json. Unexported names here carry the prefix "bt"
// so that they cannot collide with the rest of the package.

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"io"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// BPETrainOptions configures TrainBPE.
type BPETrainOptions struct {
	// Merges is the number of merges to learn (the vocabulary is 256 byte
	// tokens + Merges + len(Special)). Default 4000.
	Merges int
	// MinFrequency stops training when the best pair occurs fewer times.
	// Default 2.
	MinFrequency int
	// Special tokens appended after the merged tokens, e.g. "<|endoftext|>".
	Special []string
	// Progress receives the merges learnt (stage "tokenizer", unit
	// "merge"); nil = none.
	Progress progress.Func
}

// TrainedBPE is a byte-level BPE vocabulary produced by TrainBPE. Token ids
// are: 0..255 the single bytes (id = byte value), then one id per merge in
// the order learnt, then the special tokens.
type TrainedBPE struct {
	// Tokens[id] is the token's text in GPT-2's byte-to-unicode alphabet
	// (as stored in tokenizer.json).
	Tokens []string
	// Merges in rank order, as pairs of token ids.
	Merges [][2]int32
	// Special maps each special token to its id.
	Special map[string]int32

	rank  map[[2]int32]int32 // pair -> merge rank
	cache map[string][]int32
}

// btBytesToRunes is GPT-2's bytes_to_unicode table: printable bytes map to
// themselves, the others to code points from 256 up, in byte order.
var btBytesToRunes, btRunesToBytes = func() ([256]rune, map[rune]byte) {
	var tab [256]rune
	inv := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			tab[b] = rune(b)
		} else {
			tab[b] = rune(256 + n)
			n++
		}
		inv[tab[b]] = byte(b)
	}
	return tab, inv
}()

// ByteLevelString maps raw bytes to GPT-2's byte-level alphabet.
func ByteLevelString(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(btBytesToRunes[c])
	}
	return sb.String()
}

// PreTokenizeByteLevel splits text like GPT-2's ByteLevel pre-tokenizer,
// i.e. the regular expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// implemented by hand (Go's regexp has no look-ahead). The pieces
// concatenate to text.
func PreTokenizeByteLevel(text string) []string {
	var out []string
	s := text
	for len(s) > 0 {
		n := btNextPiece(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func btClass(r rune) int {
	switch {
	case unicode.IsLetter(r):
		return 1
	case unicode.IsNumber(r):
		return 2
	case unicode.IsSpace(r):
		return 3
	}
	return 4
}

// btRun returns the length of the prefix of s whose runes have class c.
func btRun(s string, c int) int {
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if btClass(r) != c {
			break
		}
		i += w
	}
	return i
}

func btNextPiece(s string) int {
	if s[0] == '\'' {
		for _, c := range [...]string{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"} {
			if strings.HasPrefix(s, c) {
				return len(c)
			}
		}
	}
	r, w := utf8.DecodeRuneInString(s)
	start := 0
	if r == ' ' && len(s) > 1 {
		r2, w2 := utf8.DecodeRuneInString(s[1:])
		if c := btClass(r2); c != 3 {
			return 1 + btRun(s[1:], c)
		}
		_ = w2
	}
	if c := btClass(r); c != 3 {
		return start + btRun(s, c)
	}
	// A whitespace run: \s+(?!\S) takes all but its last character when a
	// non-space follows (that character may then start the next piece as
	// " ?..."), or the whole run at the end of the text; \s+ otherwise.
	n := btRun(s, 3)
	if n == len(s) {
		return n
	}
	_, lw := utf8.DecodeLastRuneInString(s[:n])
	if n-lw > 0 {
		return n - lw
	}
	return w
}

// btPair is a candidate merge in the priority queue.
type btPair struct {
	p     [2]int32
	count int64
}

type btHeap struct {
	items []btPair
	tok   []string // token texts, for tie-breaking by bytes
}

func (h *btHeap) Len() int { return len(h.items) }
func (h *btHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.count != b.count {
		return a.count > b.count
	}
	if c := strings.Compare(h.tok[a.p[0]], h.tok[b.p[0]]); c != 0 {
		return c < 0
	}
	return h.tok[a.p[1]] < h.tok[b.p[1]]
}
func (h *btHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *btHeap) Push(x any)    { h.items = append(h.items, x.(btPair)) }
func (h *btHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// EnsureDefaults fills the unset (zero) fields and returns o: 4000 merges,
// a minimum frequency of 2.
func (o *BPETrainOptions) EnsureDefaults() *BPETrainOptions {
	if o.Merges == 0 {
		o.Merges = 4000
	}
	if o.MinFrequency == 0 {
		o.MinFrequency = 2
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *BPETrainOptions) Validate() error {
	switch {
	case o.Merges < 1:
		return fmt.Errorf("tokenizer: train: %d merges; want a positive number", o.Merges)
	case o.MinFrequency < 1:
		return fmt.Errorf("tokenizer: train: minimum frequency %d; want at least 1", o.MinFrequency)
	}
	return nil
}

// TrainBPE learns a byte-level BPE from texts. Each text is pre-tokenized
// with PreTokenizeByteLevel; merges never cross piece boundaries. Training
// is deterministic: the most frequent pair wins, ties go to the pair whose
// left token (then right token) sorts first by its raw bytes. A cancelled
// ctx stops it with ctx's error.
func TrainBPE(ctx context.Context, texts []string, opt BPETrainOptions) (*TrainedBPE, error) {
	if err := opt.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	total := 0
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !utf8.ValidString(t) {
			return nil, fmt.Errorf("tokenizer: train: text %d is not valid UTF-8", i)
		}
		for _, p := range PreTokenizeByteLevel(t) {
			counts[p]++
		}
		total += len(t)
	}
	if total == 0 {
		return nil, errors.New("tokenizer: train: no text")
	}
	// Words in sorted order keep everything deterministic.
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type word struct {
		syms []int32
		n    int64
	}
	words := make([]word, len(keys))
	for i, k := range keys {
		s := make([]int32, len(k))
		for j := 0; j < len(k); j++ {
			s[j] = int32(k[j])
		}
		words[i] = word{s, counts[k]}
	}
	tok := make([]string, 256, 256+opt.Merges+len(opt.Special))
	raw := make([]string, 256, cap(tok)) // raw bytes of each token
	for b := 0; b < 256; b++ {
		tok[b] = string(btBytesToRunes[b])
		raw[b] = string([]byte{byte(b)})
	}
	pairs := map[[2]int32]int64{}
	where := map[[2]int32][]int32{}
	for wi, w := range words {
		for j := 0; j+1 < len(w.syms); j++ {
			p := [2]int32{w.syms[j], w.syms[j+1]}
			pairs[p] += w.n
			if l := where[p]; len(l) == 0 || l[len(l)-1] != int32(wi) {
				where[p] = append(where[p], int32(wi))
			}
		}
	}
	h := &btHeap{tok: raw}
	for p, c := range pairs {
		h.items = append(h.items, btPair{p, c})
	}
	heap.Init(h)
	out := &TrainedBPE{Special: map[string]int32{}}
	task := progress.Start(opt.Progress, progress.Event{Stage: "tokenizer", Total: int64(opt.Merges), Unit: "merge"})
	for len(out.Merges) < opt.Merges && h.Len() > 0 {
		if len(out.Merges)%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			task.Set(int64(len(out.Merges)), "")
		}
		top := heap.Pop(h).(btPair)
		if pairs[top.p] != top.count || top.count <= 0 {
			continue // stale entry
		}
		if top.count < int64(opt.MinFrequency) {
			break
		}
		a, b := top.p[0], top.p[1]
		id := int32(len(tok))
		tok = append(tok, tok[a]+tok[b])
		raw = append(raw, raw[a]+raw[b])
		h.tok = raw
		out.Merges = append(out.Merges, top.p)
		changed := map[[2]int32]bool{}
		seen := map[int32]bool{}
		for _, wi := range where[top.p] {
			if seen[wi] {
				continue
			}
			seen[wi] = true
			w := &words[wi]
			if !slices.Contains(w.syms, a) {
				continue
			}
			ns := make([]int32, 0, len(w.syms))
			hit := false
			for j := 0; j < len(w.syms); j++ {
				if j+1 < len(w.syms) && w.syms[j] == a && w.syms[j+1] == b {
					ns = append(ns, id)
					j++
					hit = true
				} else {
					ns = append(ns, w.syms[j])
				}
			}
			if !hit {
				continue
			}
			for j := 0; j+1 < len(w.syms); j++ {
				p := [2]int32{w.syms[j], w.syms[j+1]}
				pairs[p] -= w.n
				changed[p] = true
			}
			for j := 0; j+1 < len(ns); j++ {
				p := [2]int32{ns[j], ns[j+1]}
				pairs[p] += w.n
				changed[p] = true
				if ns[j] == id || ns[j+1] == id {
					if l := where[p]; len(l) == 0 || l[len(l)-1] != wi {
						where[p] = append(where[p], wi)
					}
				}
			}
			w.syms = ns
		}
		delete(where, top.p)
		delete(pairs, top.p)
		for p := range changed {
			if c := pairs[p]; c > 0 {
				heap.Push(h, btPair{p, c})
			} else {
				delete(pairs, p)
			}
		}
	}
	task.Set(int64(len(out.Merges)), "")
	for _, s := range opt.Special {
		if _, dup := out.Special[s]; dup || s == "" {
			return nil, fmt.Errorf("tokenizer: train: special token %q empty or repeated", s)
		}
		out.Special[s] = int32(len(tok))
		tok = append(tok, s)
	}
	out.Tokens = tok
	out.init()
	return out, nil
}

func (t *TrainedBPE) init() {
	t.rank = make(map[[2]int32]int32, len(t.Merges))
	for i, m := range t.Merges {
		t.rank[m] = int32(i)
	}
	t.cache = map[string][]int32{}
}

// VocabSize returns the number of token ids.
func (t *TrainedBPE) VocabSize() int { return len(t.Tokens) }

// Encode tokenizes text: pre-tokenize, then apply merges by rank within each
// piece. Special tokens written in the text are not recognised (add them by
// id). Encode is not safe for concurrent use (it caches pieces).
func (t *TrainedBPE) Encode(text string) []int32 {
	var ids []int32
	for _, p := range PreTokenizeByteLevel(text) {
		if c, ok := t.cache[p]; ok {
			ids = append(ids, c...)
			continue
		}
		s := make([]int32, len(p))
		for j := 0; j < len(p); j++ {
			s[j] = int32(p[j])
		}
		for len(s) > 1 {
			best, at := int32(-1), -1
			for j := 0; j+1 < len(s); j++ {
				if r, ok := t.rank[[2]int32{s[j], s[j+1]}]; ok && (best < 0 || r < best) {
					best, at = r, j
				}
			}
			if at < 0 {
				break
			}
			m := int32(256) + best
			ns := s[:0:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == t.Merges[best][0] && s[j+1] == t.Merges[best][1] {
					ns = append(ns, m)
					j++
				} else {
					ns = append(ns, s[j])
				}
			}
			s = ns
		}
		if len(t.cache) < 1<<20 {
			t.cache[p] = s
		}
		ids = append(ids, s...)
	}
	return ids
}

// Decode returns the text of ids; special tokens decode to their content.
// Invalid ids are an error.
func (t *TrainedBPE) Decode(ids []int32) (string, error) {
	var b []byte
	for i, id := range ids {
		if id < 0 || int(id) >= len(t.Tokens) {
			return "", fmt.Errorf("tokenizer: id %d at position %d outside the vocabulary of %d", id, i, len(t.Tokens))
		}
		tk := t.Tokens[id]
		if int(id) >= 256+len(t.Merges) {
			b = append(b, tk...)
			continue
		}
		for _, r := range tk {
			b = append(b, btRunesToBytes[r])
		}
	}
	return string(b), nil
}

// WriteJSON writes the vocabulary as a HuggingFace tokenizer.json: a BPE
// model with a ByteLevel pre-tokenizer (no prefix space, GPT-2 regex),
// ByteLevel decoder and post-processor, merges as "left right" strings and
// the special tokens as added tokens.
func (t *TrainedBPE) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	q := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	fmt.Fprintf(bw, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	specials := make([]string, 0, len(t.Special))
	for s := range t.Special {
		specials = append(specials, s)
	}
	slices.SortFunc(specials, func(a, b string) int { return int(t.Special[a] - t.Special[b]) })
	for i, s := range specials {
		if i > 0 {
			bw.WriteString(",")
		}
		fmt.Fprintf(bw, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}", t.Special[s], q(s))
	}
	bw.WriteString("\n  ],\n  \"normalizer\": null,\n")
	bw.WriteString("  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true},\n")
	bw.WriteString("  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true},\n")
	bw.WriteString("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true},\n")
	bw.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	n := 256 + len(t.Merges)
	for id := 0; id < n; id++ {
		if id > 0 {
			bw.WriteString(",")
		}
		fmt.Fprintf(bw, "\n      %s: %d", q(t.Tokens[id]), id)
	}
	bw.WriteString("\n    },\n    \"merges\": [")
	for i, m := range t.Merges {
		if i > 0 {
			bw.WriteString(",")
		}
		fmt.Fprintf(bw, "\n      %s", q(t.Tokens[m[0]]+" "+t.Tokens[m[1]]))
	}
	bw.WriteString("\n    ]\n  }\n}\n")
	return bw.Flush()
}

// Save writes tokenizer.json to path atomically (temporary file, fsync,
// rename), replacing an existing file.
func (t *TrainedBPE) Save(path string) error {
	f, err := output.CreateFile(path, true)
	if err != nil {
		return err
	}
	if err := t.WriteJSON(f); err != nil {
		f.Abort()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadTrainedBPE reads back a tokenizer.json written by WriteJSON (a
// byte-level BPE whose first 256 ids are the single bytes and whose merge i
// produces id 256+i). Other tokenizer.json files are refused; load them with
// the package's general reader instead.
func ReadTrainedBPE(path string) (*TrainedBPE, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tj struct {
		AddedTokens []struct {
			ID      int32  `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		PreTokenizer struct {
			Type string `json:"type"`
		} `json:"pre_tokenizer"`
		Model struct {
			Type   string           `json:"type"`
			Vocab  map[string]int32 `json:"vocab"`
			Merges []string         `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%s: not a byte-level BPE written by TrainBPE: %s", path, fmt.Sprintf(f, a...))
	}
	if tj.Model.Type != "BPE" || tj.PreTokenizer.Type != "ByteLevel" {
		return nil, bad("model %q, pre-tokenizer %q", tj.Model.Type, tj.PreTokenizer.Type)
	}
	n := 256 + len(tj.Model.Merges)
	if len(tj.Model.Vocab) != n {
		return nil, bad("%d vocabulary entries for %d merges", len(tj.Model.Vocab), len(tj.Model.Merges))
	}
	t := &TrainedBPE{Tokens: make([]string, n), Special: map[string]int32{}}
	for s, id := range tj.Model.Vocab {
		if id < 0 || int(id) >= n || t.Tokens[id] != "" {
			return nil, bad("id %d of %q out of range or repeated", id, s)
		}
		t.Tokens[id] = s
	}
	for c := 0; c < 256; c++ {
		if t.Tokens[c] != string(btBytesToRunes[c]) {
			return nil, bad("id %d is %q, want the byte %#x", c, t.Tokens[c], c)
		}
	}
	for i, m := range tj.Model.Merges {
		l, r, ok := strings.Cut(m, " ")
		li, lok := tj.Model.Vocab[l]
		ri, rok := tj.Model.Vocab[r]
		if !ok || !lok || !rok || tj.Model.Vocab[l+r] != int32(256+i) {
			return nil, bad("merge %d %q does not produce id %d", i, m, 256+i)
		}
		t.Merges = append(t.Merges, [2]int32{li, ri})
	}
	for _, a := range tj.AddedTokens {
		if int(a.ID) != len(t.Tokens) {
			return nil, bad("added token %q has id %d, want %d", a.Content, a.ID, len(t.Tokens))
		}
		t.Special[a.Content] = a.ID
		t.Tokens = append(t.Tokens, a.Content)
	}
	t.init()
	return t, nil
}

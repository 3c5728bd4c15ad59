package tokenizer

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// mergeInfo is one BPE merge: its priority (lower merges first) and the id
// of the merged token.
type mergeInfo struct {
	rank int32
	id   int32
}

func mergeKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpeModel is a byte-pair-encoding model as in the HuggingFace tokenizers
// library: merges are applied lowest rank first (leftmost on ties) with a
// priority queue, so encoding a word of n symbols costs O(n log n).
type bpeModel struct {
	vocab        map[string]int32
	merges       map[uint64]mergeInfo
	unkID        int32 // -1 when there is no unk token
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int32 // ids of <0x00>..<0xFF>, -1 when absent

	// chunkBefore, when not 0, is a rune (the Metaspace "▁") that no
	// vocabulary token has after a different rune: a word can then be cut
	// before every such rune that follows another rune without changing
	// the result, which keeps long un-pre-tokenized lines (Llama-2,
	// Mistral) fast and cacheable.
	chunkBefore rune

	mu    sync.RWMutex
	cache map[string][]int32
}

// setChunking enables chunkBefore for r when the vocabulary allows it.
func (m *bpeModel) setChunking(r rune) {
	if _, ok := m.vocab[string(r)]; !ok {
		return
	}
	for tok := range m.vocab {
		prev := r
		for _, c := range tok {
			if c == r && prev != r {
				return
			}
			prev = c
		}
	}
	m.chunkBefore = r
}

// encode appends the ids of one pre-tokenized piece to dst, cutting it into
// chunks first when chunkBefore allows.
func (m *bpeModel) encode(word string, dst []int) ([]int, error) {
	if m.chunkBefore == 0 || m.ignoreMerges {
		return m.encodeWord(word, dst)
	}
	start := 0
	prev := m.chunkBefore
	var err error
	for i, c := range word {
		if c == m.chunkBefore && prev != m.chunkBefore && i > start {
			if dst, err = m.encodeWord(word[start:i], dst); err != nil {
				return dst, err
			}
			start = i
		}
		prev = c
	}
	return m.encodeWord(word[start:], dst)
}

const (
	cacheMaxEntries = 1 << 17
	cacheMaxWordLen = 256
)

// mergeItem is an entry of the merge priority queue.
type mergeItem struct {
	rank, pos, id int32
}

func (a mergeItem) less(b mergeItem) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// mergeHeap is a binary min-heap of mergeItems.
type mergeHeap []mergeItem

func (h *mergeHeap) push(it mergeItem) {
	*h = append(*h, it)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() mergeItem {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].less(s[l]) {
			m = r
		}
		if !s[m].less(s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// wordState holds the scratch arrays of one word's merge.
type wordState struct {
	ids, prev, next []int32
	alive           []bool
	heap            mergeHeap
}

var wordPool = sync.Pool{New: func() any { return new(wordState) }}

// UnknownCharError reports a character that the vocabulary cannot represent
// when the model has neither an unk_token nor byte_fallback.
type UnknownCharError struct {
	Char rune
}

func (e *UnknownCharError) Error() string {
	return fmt.Sprintf("tokenizer: character %q (U+%04X) is not in the vocabulary and the BPE model has neither unk_token nor byte_fallback", e.Char, e.Char)
}

// encodeWord appends the ids of one pre-tokenized piece to dst.
func (m *bpeModel) encodeWord(word string, dst []int) ([]int, error) {
	if word == "" {
		return dst, nil
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, int(id)), nil
		}
	}
	cacheable := len(word) <= cacheMaxWordLen
	if cacheable {
		m.mu.RLock()
		ids, ok := m.cache[word]
		m.mu.RUnlock()
		if ok {
			for _, id := range ids {
				dst = append(dst, int(id))
			}
			return dst, nil
		}
	}
	w := wordPool.Get().(*wordState)
	defer wordPool.Put(w)
	w.ids = w.ids[:0]
	lastUnk := false
	for i := 0; i < len(word); {
		r, n := utf8.DecodeRuneInString(word[i:])
		if id, ok := m.vocab[word[i:i+n]]; ok {
			w.ids = append(w.ids, id)
			lastUnk = false
			i += n
			continue
		}
		if m.byteFallback {
			all := true
			for j := i; j < i+n; j++ {
				if m.byteIDs[word[j]] < 0 {
					all = false
					break
				}
			}
			if all {
				for j := i; j < i+n; j++ {
					w.ids = append(w.ids, m.byteIDs[word[j]])
				}
				lastUnk = false
				i += n
				continue
			}
		}
		if m.unkID < 0 {
			return dst, &UnknownCharError{Char: r}
		}
		if !(m.fuseUnk && lastUnk) {
			w.ids = append(w.ids, m.unkID)
		}
		lastUnk = true
		i += n
	}
	ids := m.merge(w)
	if cacheable {
		m.mu.Lock()
		if len(m.cache) < cacheMaxEntries {
			m.cache[word] = append([]int32(nil), ids...)
		}
		m.mu.Unlock()
	}
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst, nil
}

// merge applies the merges to w.ids and returns the resulting ids (which
// alias w's scratch space).
func (m *bpeModel) merge(w *wordState) []int32 {
	n := len(w.ids)
	if n < 2 {
		return w.ids
	}
	w.prev = grow(w.prev, n)
	w.next = grow(w.next, n)
	if cap(w.alive) < n {
		w.alive = make([]bool, n)
	}
	w.alive = w.alive[:n]
	w.heap = w.heap[:0]
	for i := 0; i < n; i++ {
		w.prev[i] = int32(i - 1)
		w.next[i] = int32(i + 1)
		w.alive[i] = true
	}
	w.next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		if mi, ok := m.merges[mergeKey(w.ids[i], w.ids[i+1])]; ok {
			w.heap.push(mergeItem{mi.rank, int32(i), mi.id})
		}
	}
	for len(w.heap) > 0 {
		top := w.heap.pop()
		p := top.pos
		if !w.alive[p] {
			continue
		}
		nx := w.next[p]
		if nx < 0 {
			continue
		}
		mi, ok := m.merges[mergeKey(w.ids[p], w.ids[nx])]
		if !ok || mi.id != top.id {
			continue
		}
		w.ids[p] = top.id
		w.alive[nx] = false
		nn := w.next[nx]
		w.next[p] = nn
		if nn >= 0 {
			w.prev[nn] = p
		}
		if pp := w.prev[p]; pp >= 0 {
			if mi, ok := m.merges[mergeKey(w.ids[pp], w.ids[p])]; ok {
				w.heap.push(mergeItem{mi.rank, pp, mi.id})
			}
		}
		if nn >= 0 {
			if mi, ok := m.merges[mergeKey(w.ids[p], w.ids[nn])]; ok {
				w.heap.push(mergeItem{mi.rank, p, mi.id})
			}
		}
	}
	out := w.ids[:0]
	for i := int32(0); i >= 0; i = w.next[i] {
		out = append(out, w.ids[i])
	}
	return out
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

package tokenizer

// The GPT-2 byte-to-unicode table: every byte maps to a printable rune so
// that byte strings can be written as ordinary text in vocabularies.
// Printable Latin-1 bytes map to themselves; the others map to 256, 257, ...
var (
	byteToRune [256]rune
	runeToByte map[rune]byte
	// byteToStr[b] is string(byteToRune[b]), precomputed.
	byteToStr [256]string
)

func init() {
	runeToByte = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = rune(256 + n)
			n++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
		byteToStr[b] = string(r)
	}
}

// byteLevelEncode maps every byte of s to its byte-level rune.
func byteLevelEncode(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = append(buf, byteToStr[s[i]]...)
	}
	return string(buf)
}

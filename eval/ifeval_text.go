package eval

import (
	"regexp"
	"strings"
	"unicode"
)

// Text measures IFEval's checkers take from NLTK and langdetect,
// re-implemented in Go. Where they approximate, the comment says how.

var (
	wordRE  = regexp.MustCompile(`[\p{L}\p{N}_]+`)
	tokenRE = regexp.MustCompile(`[\p{L}\p{N}_]+(?:-[\p{L}\p{N}_]+)*`)
)

// countWords is instructions_util.count_words: the runs of word
// characters (NLTK's RegexpTokenizer(r"\w+"); Python's \w is letters,
// digits and "_" of any script).
func countWords(s string) int { return len(wordRE.FindAllStringIndex(s, -1)) }

// wordTokens stands for NLTK's word_tokenize where only the words in all
// capitals are counted (CapitalWordFrequencyChecker): runs of word
// characters, a hyphenated word one token. word_tokenize also splits
// contractions ("DON'T" into "DO" and "N'T") and keeps punctuation as
// tokens; neither changes which tokens are all capitals, except that
// "U.S." is one token there and two here.
func wordTokens(s string) []string { return tokenRE.FindAllString(s, -1) }

// punktAbbrev are abbreviations after which a period does not end a
// sentence (a part of those NLTK's English Punkt model learned).
var punktAbbrev = map[string]bool{}

func init() {
	for _, a := range strings.Fields("mr mrs ms dr prof st jr sr inc ltd co corp vs etc e.g i.e u.s u.k a.m p.m " +
		"jan feb mar apr jun jul aug sep sept oct nov dec no vol fig approx dept gen gov sen rep rev capt col lt sgt mt ft ave blvd " +
		"cf al ed eds ph.d b.a m.a u.n mass calif wash fla pa va") {
		punktAbbrev[a] = true
	}
}

// countSentences stands for instructions_util.count_sentences (NLTK's
// English Punkt tokenizer), by Punkt's main rules: a sentence ends at a
// word ending in "?" or "!", or in "." when the word is not a known
// abbreviation, an initial ("J.") or an ellipsis followed by a word in
// lower case, provided whitespace follows (closing quotes and brackets
// after the mark stay with the sentence). Punkt's learned collocations
// and its case statistics are not reproduced: text full of abbreviations
// Punkt learned and this list lacks counts more sentences here.
func countSentences(s string) int {
	toks := strings.Fields(s)
	if len(toks) == 0 {
		return 0
	}
	n := 1
	for i := 0; i+1 < len(toks); i++ {
		if sentenceEnds(toks[i], toks[i+1]) {
			n++
		}
	}
	return n
}

func sentenceEnds(tok, next string) bool {
	t := strings.TrimRight(tok, `"'”’)]}*`)
	if t == "" {
		return false
	}
	switch t[len(t)-1] {
	case '?', '!':
		return true
	case '.':
	default:
		return false
	}
	nextLower := false
	for _, r := range next {
		if unicode.IsLetter(r) {
			nextLower = unicode.IsLower(r)
			break
		}
	}
	if strings.HasSuffix(t, "..") { // an ellipsis
		return !nextLower
	}
	base := strings.ToLower(strings.TrimLeft(strings.TrimSuffix(t, "."), `"'“‘([{*`))
	if punktAbbrev[base] {
		return false
	}
	if r := []rune(base); len(r) == 1 && unicode.IsLetter(r[0]) { // an initial
		return false
	}
	return true
}

// detectLanguage stands for langdetect.detect, which the reference calls
// (language:response_language and the English checks of change_case). It
// returns an ISO 639-1 code, and false where langdetect raises (no letters
// at all: the reference then counts the instruction as followed).
// langdetect compares character n-gram profiles of 55 languages; this
// decides by script first, which settles most languages of IFEval's
// prompts (Korean, Thai, Bengali, Gujarati, Punjabi, Kannada, Tamil,
// Telugu, Malayalam...), and within the Arabic, Cyrillic, Devanagari and
// Latin scripts by letters unique to a language and by the commonest
// function words. It agrees with langdetect on ordinary one-language
// prose; on a few words, or mixed languages, the two can differ.
func detectLanguage(s string) (string, bool) {
	counts := map[string]int{}
	letters := 0
	for _, r := range s {
		if !unicode.IsLetter(r) {
			continue
		}
		letters++
		for _, sc := range scripts {
			if unicode.Is(sc.table, r) {
				counts[sc.name]++
				break
			}
		}
	}
	if letters == 0 {
		return "", false
	}
	best, bn := "Latin", 0
	for _, sc := range scripts {
		if counts[sc.name] > bn {
			best, bn = sc.name, counts[sc.name]
		}
	}
	if counts["Hiragana"]+counts["Katakana"] > 0 && (best == "Han" || best == "Hiragana" || best == "Katakana") {
		return "ja", true
	}
	switch best {
	case "Arabic":
		return byMarks(s, "ar", map[string]string{"fa": "پچژگیک", "ur": "ٹڈڑںےہھ"}), true
	case "Cyrillic":
		if strings.ContainsAny(s, "іїєґІЇЄҐ") {
			return "uk", true
		}
		if strings.ContainsAny(s, "ыэёЫЭЁ") {
			return "ru", true
		}
		return byWords(s, "ru", cyrillicWords), true
	case "Devanagari":
		return byWords(s, "hi", devanagariWords), true
	case "Latin":
		if strings.ContainsAny(strings.ToLower(s), "ơưđăạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ") {
			return "vi", true
		}
		return byWords(s, "en", latinWords), true
	}
	for _, sc := range scripts {
		if sc.name == best {
			return sc.lang, true
		}
	}
	return "en", true
}

var scripts = []struct {
	name  string
	table *unicode.RangeTable
	lang  string // the language of a script used by one (of langdetect's)
}{
	{"Latin", unicode.Latin, ""}, {"Cyrillic", unicode.Cyrillic, ""}, {"Arabic", unicode.Arabic, ""},
	{"Devanagari", unicode.Devanagari, ""}, {"Han", unicode.Han, "zh-cn"}, {"Hiragana", unicode.Hiragana, "ja"},
	{"Katakana", unicode.Katakana, "ja"}, {"Hangul", unicode.Hangul, "ko"}, {"Thai", unicode.Thai, "th"},
	{"Bengali", unicode.Bengali, "bn"}, {"Gujarati", unicode.Gujarati, "gu"}, {"Gurmukhi", unicode.Gurmukhi, "pa"},
	{"Kannada", unicode.Kannada, "kn"}, {"Tamil", unicode.Tamil, "ta"}, {"Telugu", unicode.Telugu, "te"},
	{"Malayalam", unicode.Malayalam, "ml"}, {"Hebrew", unicode.Hebrew, "he"}, {"Greek", unicode.Greek, "el"},
}

// byMarks picks the language whose own letters occur most (def: none).
func byMarks(s, def string, marks map[string]string) string {
	best, bn := def, 0
	for lang, m := range marks {
		n := 0
		for _, r := range m {
			n += strings.Count(s, string(r))
		}
		if n > bn || (n == bn && n > 0 && lang < best) {
			best, bn = lang, n
		}
	}
	return best
}

// byWords picks the language whose function words occur most among the
// text's words (def on no hit; ties go to the first-listed word list's
// language in name order).
func byWords(s, def string, words map[string]map[string]bool) string {
	n := map[string]int{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.Is(unicode.Mn, r) && !unicode.Is(unicode.Mc, r)
	}) {
		for lang, set := range words {
			if set[w] {
				n[lang]++
			}
		}
	}
	best, bn := def, 0
	for lang, c := range n {
		if c > bn || (c == bn && lang < best) {
			best, bn = lang, c
		}
	}
	return best
}

func wordSets(m map[string]string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for lang, ws := range m {
		out[lang] = map[string]bool{}
		for _, w := range strings.Fields(ws) {
			out[lang][w] = true
		}
	}
	return out
}

var (
	latinWords = wordSets(map[string]string{
		"en": "the and of to is in that it was for on are with as be this have you not but they we at by from or an which one all were their there what so if would about has had will can my your our its been more",
		"de": "der die das und ist nicht ein eine zu den mit sich des auf für im dem von auch es sind wir ich sie aber wie oder wenn noch nach bei einer",
		"fr": "le la les et est des un une du en dans que qui pour pas sur au avec ce il elle sont nous vous mais ou aux cette",
		"es": "el la los las y es de que en un una por con para no se del al lo como más pero sus hoy está son muy también",
		"pt": "o a os as e é de que em um uma do da dos das para com não no na por se mais mas seu sua são também você",
		"it": "il lo la gli le e è di che un una per con non del della dei nel alla sono anche come più ma questo questa ci si",
		"nl": "de het een en is van in dat op te zijn met voor niet die er aan ook als maar wij ik",
		"fi": "ja on ei se että hän oli ovat kun mutta tai niin myös mitä joka kuin tämä sekä vain olla ole hyvin",
		"sw": "na ya wa kwa ni za la katika hii kuwa yake cha vya huo hiyo sana pia lakini kama kwamba wao yeye mimi",
		"pl": "i w nie na się z że do to jest jak co ale o tak za po od jego przez",
		"sv": "och att det som en på är av för med till den har inte om ett men jag vi",
		"tr": "ve bir bu da de için ile çok olarak gibi daha ama ne var",
		"id": "dan yang di ini itu dengan untuk tidak dari dalam akan pada juga ada adalah",
	})
	cyrillicWords = wordSets(map[string]string{
		"ru": "и в не на что я с он как это по но они к у же вы за бы от так его все она мы ты было",
		"bg": "и на е да се за в от не са че с по това как той тя но ще към със което като много",
		"mk": "и на е да се за во од не се што со по ова како тој таа но ќе",
	})
	devanagariWords = wordSets(map[string]string{
		"hi": "है और के की में से को का एक यह हैं भी पर लिए नहीं कि था जो तो हम आप वह",
		"mr": "आहे आणि या व हे ते की आहेत होते एक मी तो ती त्या त्याच्या करून नाही केले",
		"ne": "छ र को मा हो यो गर्न पनि छन् भएको गरेको थियो लागि तथा हुन्छ त्यो",
	})
)

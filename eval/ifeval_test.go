package eval

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// The documented cases of the reference implementation: every test of
// google-research/google-research instruction_following_eval/
// instructions_test.py (commit 83282e4) for the 25 instruction ids IFEval's
// prompts use, restated with the same responses, arguments and expected
// answers (the Python test's message constants, spaces and line breaks
// included). Its rephrasing, key-sentence and constrained-start cases test
// classes no IFEval prompt uses and are left out.
var ifevalReferenceCases = []struct {
	id, kwargs, response string
	want                 bool
}{
	{"language:response_language", `{"language": "en"}`, "The response is English", true},
	{"language:response_language", `{"language": "es"}`, "Desayunamos en McDonald's hoy", true},
	{"language:response_language", `{"language": "en"}`, "Today we visit the Louvre", true},

	{"length_constraints:number_sentences", `{"relation": "less than", "num_sentences": 4}`, "xx,x. xx,x! xx/x. x{x}x?", false},
	{"length_constraints:number_sentences", `{"relation": "less than", "num_sentences": 5}`, "xxxx. xx,x! xxxx. x(x)x?", true},
	{"length_constraints:number_sentences", `{"relation": "at least", "num_sentences": 4}`, "xxxx. xx,x! xx|x. x&x x?", true},
	{"length_constraints:number_sentences", `{"relation": "at least", "num_sentences": 5}`, "xx-x. xx,x! xx}x. x,xx?", false},

	{"detectable_content:number_placeholders", `{"num_placeholders": 5}`, "Sure, here is a short template with 5 placeholders:\n[Name]\n[Email]\n[Phone]\n[Address]\n[Website]\nThis template can be used for a variety of purposes, such ascreating a contact list, sending out surveys, or creating a sign-up form.", true},
	{"detectable_content:number_placeholders", `{"num_placeholders": 7}`, "My [adjective] [noun] is [adjective] [noun]. I [verb] and [verb].", false},

	{"detectable_format:number_bullet_lists", `{"num_bullets": 3}`, bulletMessage1, true},
	{"detectable_format:number_bullet_lists", `{"num_bullets": 2}`, bulletMessage2, true},
	{"detectable_format:number_bullet_lists", `{"num_bullets": 3}`, bulletMessage3, true},
	{"detectable_format:number_bullet_lists", `{"num_bullets": 3}`, bulletMessage4, true},
	{"detectable_format:number_bullet_lists", `{"num_bullets": 1}`, bulletMessage5, true},

	{"detectable_format:constrained_response", `{}`, "\n My answer is no.\n", true},
	{"detectable_format:constrained_response", `{}`, "My answer is no.   ", true},
	{"detectable_format:constrained_response", `{}`, "\n  My answer is no. I am still under development and I am always learning and\n  improving. I am not the best chatbot in the world, but I am striving to be\n  the best that I can be.", true},

	{"detectable_format:number_highlighted_sections", `{"num_highlights": 2}`, highlightMessage1, true},
	{"detectable_format:number_highlighted_sections", `{"num_highlights": 2}`, highlightMessage2, false},
	{"detectable_format:number_highlighted_sections", `{"num_highlights": 4}`, highlightMessage3, true},

	{"detectable_format:multiple_sections", `{"section_spliter": "Section", "num_sections": 3}`, "\n  Your response must have multiple sections. Mark the beginning of each section\n  with \"Section X\", such as:\n  Section 1\n  [content of section 1]\n  Section 2\n  [content of section 2]", false},
	{"detectable_format:multiple_sections", `{"section_spliter": "SECTION", "num_sections": 2}`, "SECTION 1\n  [content of section 1]\n  SECTION 2\n  [content of section 2]", true},

	{"length_constraints:number_paragraphs", `{"num_paragraphs": 3}`, "\n  paragraph 1\n  ***\n  paragraph 2\n  ***\n  paragraph 3", true},
	{"length_constraints:number_paragraphs", `{"num_paragraphs": 3}`, "\n          ***\n  paragraph 1\n          ***\n      paragraph 2\n          ***\n      paragraph 3", true},
	{"length_constraints:number_paragraphs", `{"num_paragraphs": 3}`, "\n  paragraph 1\n          ***\n      paragraph 2\n          ***\n      paragraph 3\n          ***", true},
	{"length_constraints:number_paragraphs", `{"num_paragraphs": 2}`, "\n  paragraph 1\n          ***\n      paragraph 2\n          ***\n          ***", false},

	{"detectable_content:postscript", `{"postscript_marker": "P.S."}`, postscriptMessage1, true},
	{"detectable_content:postscript", `{"postscript_marker": "PS:"}`, postscriptMessage1, false},
	{"detectable_content:postscript", `{"postscript_marker": "P.P.S"}`, postscriptMessage2, true},
	{"detectable_content:postscript", `{"postscript_marker": "P.S."}`, postscriptMessage3, true},
	{"detectable_content:postscript", `{"postscript_marker": "P.P.S"}`, "\n  If the length of a square is one, the area of the square will also be one.\n  p.p.s what if the entire response was lower case letters?\n  ", true},
	{"detectable_content:postscript", `{"postscript_marker": "P.S."}`, "\n  The mysteries of space and time are mysterious.\n  P. S. Sometimes there are even spaces between P. and S..\n  ", true},

	{"keywords:existence", `{"keywords": ["romantic", "river", "Mona Lisa"]}`, keywordMessage1, true},
	{"keywords:existence", `{"keywords": ["romantic", "river", "Mona Lisa"]}`, keywordMessage2, false},

	{"keywords:frequency", `{"keyword": "  keyword ", "frequency": 4, "relation": "less than"}`, "\n  keyword, Keyword, KEYWORD\n  ", true},
	{"keywords:frequency", `{"keyword": "  keyword ", "frequency": 3, "relation": "at least"}`, "\n  keyword, Keyword, KEYWORD\n  ", true},
	{"keywords:frequency", `{"keyword": "KEYWORD", "frequency": 4, "relation": "at least"}`, "\n    *keyword\n    *Keyword\n    *KEYWORD\n  ", false},

	{"length_constraints:number_words", `{"num_words": 8, "relation": "less than"}`, "\n  d3sCRi7 lArge lAnguagE M0del w1tH 20 w0RdS.", true},
	{"length_constraints:number_words", `{"num_words": 16, "relation": "less than"}`, numWordsMessage2, false},
	{"length_constraints:number_words", `{"num_words": 16, "relation": "at least"}`, numWordsMessage2, true},

	{"length_constraints:nth_paragraph_first_word", `{"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "I"}`, "\n  paragraph 1\n\n  I paragraph 2\n\n  paragraph 3", true},
	{"length_constraints:nth_paragraph_first_word", `{"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "I"}`, "\n  paragraph 1\n\n  I paragraph 2", false},
	{"length_constraints:nth_paragraph_first_word", `{"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "I"}`, "\n  paragraph 1\n\n  fail paragraph 2\n\n  paragraph 3", false},
	{"length_constraints:nth_paragraph_first_word", `{"num_paragraphs": 5, "nth_paragraph": 5, "first_word": "haha"}`, firstWordMessage("Really more than three? No way!"), true},
	{"length_constraints:nth_paragraph_first_word", `{"num_paragraphs": 5, "nth_paragraph": 3, "first_word": "Really"}`, firstWordMessage(`"Really?! more than three? No way!"`), true},
	{"length_constraints:nth_paragraph_first_word", `{"num_paragraphs": 5, "nth_paragraph": 3, "first_word": "Really"}`, firstWordMessage("Rea!lly more than three? No way!"), false},

	{"keywords:forbidden_words", `{"forbidden_words": ["HOUSE", "POWER", "BECOME"]}`, forbiddenMessage1, false},
	{"keywords:forbidden_words", `{"forbidden_words": ["HOUSE", "POWER", "BECOME"]}`, forbiddenMessage2, true},
	{"keywords:forbidden_words", `{"forbidden_words": ["HOUSE", "POWER", "BECOME"]}`, forbiddenMessage3, true},
	{"keywords:forbidden_words", `{"forbidden_words": ["GOOGLE", "TEXT"]}`, forbiddenMessage1, true},
	{"keywords:forbidden_words", `{"forbidden_words": ["GOOGLE", "TEXT"]}`, forbiddenMessage2, true},
	{"keywords:forbidden_words", `{"forbidden_words": ["GOOGLE", "TEXT"]}`, forbiddenMessage3, false},
	{"keywords:forbidden_words", `{"forbidden_words": ["GENE", "TRANSFORM"]}`, forbiddenMessage3, true},

	{"combination:two_responses", `{}`, "\n  This is response 1.\n  ******\n  This is response 2.\n  ", true},
	{"combination:two_responses", `{}`, "\n  This is response 1.\n  ******\n  This is response 1.\n  ", false},
	{"combination:two_responses", `{}`, "\n  This is response 1.\n  ******\n  This is response 2.\n  ******\n  This is response 3.\n  ", false},
	{"combination:two_responses", `{}`, "\n  ******\n  Response 1.\n  ******\n  ******\n  Response 2.\n  ******\n  ", false},
	{"combination:two_responses", `{}`, "\n  ******\n  Response 1\n  ******\n  Response 2\n  ******\n  ", true},

	{"combination:repeat_prompt", `{"prompt_to_repeat": "Write a CL description."}`, "Write a CL description. Hi, Le and TJ, please\n  check this out. Thanks.\n  ", true},
	{"combination:repeat_prompt", `{"prompt_to_repeat": "Write a CL description."}`, "Hi, Le and TJ. Write a CL description. Thanks.\n  ", false},

	{"startend:end_checker", `{"end_phrase": "\n  Any more questions?\n  "}`, "\n  The answer is 7. Any more questions?\n  ", true},
	{"startend:end_checker", `{"end_phrase": "\n  This is the end.\n  "}`, "\n  At the end of this prompt I am required to say that this is the end.\n  ", true},
	{"startend:end_checker", `{"end_phrase": "\n  This will fail.\n  "}`, "\n  This will fail. Paris is cool.\n  ", false},

	{"detectable_format:title", `{}`, "\n  <<Song of Joy>>\n  La la la. Happy song.\n  ", true},
	{"detectable_format:title", `{}`, "\n  Is it fine for title to be at the end?\n  <<This is the title>>\n  ", true},
	{"detectable_format:title", `{}`, "\n  << >>\n  There is no title.\n  ", false},
	{"detectable_format:title", `{}`, "\n  <<This is not a title.\n  This is a paragraph.>>\n  ", false},

	{"keywords:letter_frequency", `{"letter": "T", "let_frequency": 4, "let_relation": "at least"}`, "\n  There is the T. Four T's.\n  ", true},
	{"keywords:letter_frequency", `{"letter": "a", "let_frequency": 4, "let_relation": "less than"}`, "\n  asdfghjkl!!aA\n  ", true},
	{"keywords:letter_frequency", `{"letter": "p", "let_frequency": 4, "let_relation": "at least"}`, "\n  asdfghjkl!!aA\n  ", false},

	{"change_case:english_capital", `{}`, "\n  THIS IS AN ENGLISH SENTENCE. EVERY LETTER IS CAPITALIZED!!! AMAZING.\n  ", true},
	{"change_case:english_capital", `{}`, "\n  Every Word Is Capitalized.\n  ", false},
	{"change_case:english_lowercase", `{}`, "\n  every letter is lowercase.\n  ", true},
	{"change_case:english_lowercase", `{}`, "\n  Almost every letter is lowercase.\n  ", false},

	{"punctuation:no_comma", `{}`, "\n  Every sentence is short. There is no need for a comma.\n  ", true},
	{"punctuation:no_comma", `{}`, "\n  Since the start of time, people have always found a way to punctuate.\n  ", false},

	{"change_case:capital_word_frequency", `{"capital_frequency": 3, "capital_relation": "at least"}`, "\n  HERE there are THREE FUlly CAPITAL words.\n  ", true},
	{"change_case:capital_word_frequency", `{"capital_frequency": 5, "capital_relation": "less than"}`, "\n  THERE are Four FULLY CAPITAL WORDS. Many Others Are Only Partially So.\n  ", true},
	{"change_case:capital_word_frequency", `{"capital_frequency": 4, "capital_relation": "less than"}`, "\n  THERE are Four FULLY CAPITAL WORDS. Many Others Are Only Partially So.\n  ", false},

	{"startend:quotation", `{}`, "\n  \"This entire message is wrapped in double quotation marks.\"\n  ", true},
	{"startend:quotation", `{}`, "\n  \"This message is wrapped in double quotation marks.\" But not everything.\n  ", false},
}

const (
	bulletMessage1 = "\n  A Markdown bullet point is a way of formatting text to create a list. To\n  create a bullet point, start each line with an asterisk (*). For example:\n  * This is a bullet point.\n  *(no space required)Another bullet point.\n  * (no newline ending required)Another bullet point.\n  markdown bullet points are often used to create to-do lists or to list items\n  in a step-by-step guide."
	bulletMessage2 = "\n  Check that inline asterisk (*), *, will not be counted. Only * that starts a\n  bullet list will be counted:\n    * This is a bullet point.\n    * Another bullet point.\n    . dot is not counted"
	bulletMessage3 = "\n  Here are three bullets starting with asterisk:\n  * I am a large language model, also known as a conversational AI.\n  * I am trained on a massive amount of text data, and I am able to communicate.\n  * I am still under development, but I am learning new things every day."
	bulletMessage4 = "\n  Here are three markdown bullets:\n  - I am a large language model, also known as a conversational AI.\n  - I am trained on a massive amount of text data, and I am able to communicate.\n  -I am still under development, but I am learning new things every day."
	bulletMessage5 = "\n  Paragraph 1\n  ***\n  Paragraph 2\n  ***\n  Paragraph 3\n  * only one bullet point\n  "

	highlightMessage1 = "\n  To highlight text with Markdown, you can use the * character before and after\n  the text you want to highlight. For example, if you want to highlight the\n  word `hello`, you would type:*hello*, You can also use the ** character to\n  create bold text. For example, if you want to bold the word `hello`, you\n  would type: **hello** "
	highlightMessage2 = "\n  Sure, here are the numerical methods for solving partial differential\n  equations highlighted with Markdown:\n  *Finite difference methods\n  *Finite element methods*\n  *Boundary element methods\n  *Monte Carlo methods\n  I hope this helps!"
	highlightMessage3 = "\n  There is allowed to be *two different* highlighted *sections in the same*\n  line. **This is also true** for **double markdown highlights.**\n  "

	postscriptMessage1 = "\n  I will do my best to follow your instructions and always start my responses\n  with \"My response is:\". I will try to be as consistent as possible, but\n  please be patient with me if I make a mistake. I am still under development,\n  and I am always learning new things.\n\n  P.S. I hope this is what you were looking for."
	postscriptMessage2 = "\n  Sure, here is my response with a postscript starting with P.P.S.:\n\n  My response is: I hope this answers your question.\n\n  P.P.S. I am always happy to answer any other questions you may have.\n\n  Do you have any other questions for me?"
	postscriptMessage3 = "\n  The radius of a unit circle is 1. However, I can give you a funny and wrong\n  answer: the radius of a unit circle is 0. This is because a unit circle is a\n  circle with a radius of 1, and if the radius is 0, then the circle has no\n  size and is just a point. (not starting a new line) P.S. I hope you enjoyed\n  my joke!"

	keywordMessage1 = "\n  Paris is a city of beauty and romance. The romantic river Seine winds its way\n  through the city, past iconic landmarks like the Eiffel Tower and the Louvre\n  Museum, where the Mona Lisa resides. Whether you're taking a boat cruise down\n  the river or simply strolling along the banks, you're sure to be captivated\n  by the city's charm."
	keywordMessage2 = "\n  Paris is a city of beauty, romance, and history. It is home to some of the\n  most iconic landmarks in the world, including the Eiffel Tower, the Louvre\n  Museum, and the Notre Dame Cathedral. The city is also known for its romantic\n  river cruises, its delicious food, and its stylish people.\n  "

	numWordsMessage2 = "\n  L4RGE L4NGU4GE M0DEL: AI syst3m th4t und3rstands, g3n3r4tes, or tr4nsforms\n  l4ngu4g3 b4s3d on pr3vious l3arning & d4t4."

	forbiddenMessage1 = "\n  The Nazis came to power in 1933 through a combination of legal and illegal\n  means. Hitler was appointed chancellor by President Paul von Hindenburg, and\n  the Nazis quickly consolidated their power by passing a series of laws that\n  restricted the rights of opposition parties and individuals. By 1934, Hitler\n  had become dictator of Germany.\n  "
	forbiddenMessage2 = "\n  Dinosaurs were a diverse group of reptiles that dominated the Earth for over\n  160 million years. They came in all shapes and sizes, from the tiny\n  Compsognathus to the massive Argentinosaurus. Dinosaurs were the most\n  successful land animals on Earth until they went extinct about 66 million\n  years ago. The exact cause of their extinction is still unknown, but it\n  is thought to have been a combination of factors, including an asteroid\n  impact and climate change.\n  "
	forbiddenMessage3 = "\n  GPT, or Generative Pre-trained Transformer, is a family of neural network\n  models that uses the transformer architecture. GPT models are trained on a\n  massive dataset of text and code, and can be used for a variety of tasks,\n  including text generation, translation, and question answering. GPT models\n  have been shown to be very effective at these tasks, and are being used by\n  a variety of companies and organizations like Google.\n  "
)

// firstWordMessage is PARAGRAPH_FIRST_WORD_TEST_4 to _6: five paragraphs,
// the third given.
func firstWordMessage(third string) string {
	return "\n  Wow this is a very long response.\n\n  I can't believe there is more than three paragraphs.\n\n  " + third +
		"\n\n  I can't believe it but I guess I am living proof.\n\n  Haha, you go that right."
}

func ifCheckFor(t *testing.T, id, kwargs string) ifCheck {
	t.Helper()
	var kw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(kwargs), &kw); err != nil {
		t.Fatal(err)
	}
	c, err := ifCheckers[id](ifArgs{kw: kw})
	if err != nil {
		t.Fatalf("%s %s: %v", id, kwargs, err)
	}
	return c
}

func TestIFEvalReferenceCases(t *testing.T) {
	seen := map[string]bool{}
	for i, tc := range ifevalReferenceCases {
		seen[tc.id] = true
		if got := ifCheckFor(t, tc.id, tc.kwargs)(tc.response); got != tc.want {
			t.Errorf("case %d %s %s: %v, want %v (response %q)", i, tc.id, tc.kwargs, got, tc.want, tc.response)
		}
	}
	// json_format has no case in instructions_test.py; these follow its
	// check_following (fences of ```json, ```Json, ```JSON or ``` removed).
	for _, tc := range []struct {
		r    string
		want bool
	}{{"```json\n{\"a\": 1}\n```", true}, {" [1, 2] ", true}, {"```JSON{\"a\":[]}```", true}, {"Here: {\"a\": 1}", false}, {"{'a': 1}", false}} {
		if got := ifCheckFor(t, "detectable_format:json_format", `{}`)(tc.r); got != tc.want {
			t.Errorf("json_format %q: %v, want %v", tc.r, got, tc.want)
		}
	}
	seen["detectable_format:json_format"] = true
	for _, id := range IFEvalInstructions() {
		if !seen[id] {
			t.Errorf("instruction %s has no test case", id)
		}
	}
}

// TestIFEvalLoose: the loose score tries the response without its first
// or last line and without asterisks (evaluation_lib.py), strict does not;
// an empty response follows nothing.
func TestIFEvalLoose(t *testing.T) {
	ps, err := ParseIFEval("p.jsonl", strings.NewReader(
		`{"key": 1, "prompt": "p", "instruction_id_list": ["startend:quotation", "detectable_format:title"], "kwargs": [{}, {}]}`+"\n"+
			`{"key": 2, "prompt": "q", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"unused": null}]}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp := []string{"Sure, here it is:\n\"<<Title>> text\"", "  "}
	strict, loose := IFEvalFollowed(&ps[0], resp[0])
	if strict[0] || !loose[0] || !strict[1] || !loose[1] {
		t.Errorf("strict %v loose %v, want [false true] [true true]", strict, loose)
	}
	r, err := ScoreIFEval("p.jsonl", ps, resp)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"prompt_level_strict_acc": 0, "inst_level_strict_acc": 1.0 / 3, "prompt_level_loose_acc": 0.5, "inst_level_loose_acc": 2.0 / 3}
	for _, name := range IFEvalMetrics {
		m, ok := r.Metric(name)
		if !ok || math.Abs(m.Value-want[name]) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, m.Value, want[name])
		}
	}
	if _, err := ScoreIFEval("p", ps, resp[:1]); err == nil {
		t.Error("one response for two prompts: no error")
	}
}

// TestIFEvalOnData: the shared prompt file parses (541 prompts, 834
// instructions of 25 ids, all with a checker), and scoring the bare
// prompts as responses gives a result in range.
func TestIFEvalOnData(t *testing.T) {
	p := sdtest.Require(t, "eval/ifeval_input_data.jsonl")
	ps, err := LoadIFEval(p)
	if err != nil {
		t.Fatal(err)
	}
	n, ids := 0, map[string]bool{}
	for _, q := range ps {
		n += len(q.Instructions)
		for _, id := range q.Instructions {
			ids[id] = true
		}
	}
	if len(ps) != 541 || n != 834 || len(ids) != 25 {
		t.Fatalf("%d prompts, %d instructions, %d ids; want 541, 834, 25", len(ps), n, len(ids))
	}
	resp := make([]string, len(ps))
	for i, q := range ps {
		resp[i] = q.Prompt
	}
	r, err := ScoreIFEval(p, ps, resp)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Metrics {
		if m.Value < 0 || m.Value > 1 || m.Stderr <= 0 {
			t.Errorf("%+v", m)
		}
	}
}

// TestIFEvalFormatErrors: the line and what was expected.
func TestIFEvalFormatErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\n{\"key\": 1, \"prompt\": \"p\", \"instruction_id_list\": [\"x:y\"], \"kwargs\": [{}]}", `f.jsonl:2: unknown instruction "x:y" (known: change_case:capital_word_frequency, `},
		{`{"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": []}`, "f.jsonl:1: want a JSON object"},
		{`{"key": 1, "prompt": "p", "instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"relation": "at most", "num_words": 3}]}`, `f.jsonl:1: instruction length_constraints:number_words: argument "relation" = "at most": want "less than" or "at least"`},
		{`{"key": 1, "prompt": "p", "instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": "x"}]}`, `argument "keywords" = "x": want a list of strings`},
		{`[1]`, "f.jsonl:1: want a JSON object"},
	} {
		_, err := ParseIFEval("f.jsonl", strings.NewReader(tc.in))
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a *FormatError with %q", tc.in, err, tc.want)
		}
	}
}

// TestDetectLanguage: the scripts and languages of IFEval's
// response_language prompts.
func TestDetectLanguage(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"Der Hund ist nicht in dem Haus, und wir sind auch nicht da.", "de"},
		{"O cão não está em casa e nós também não estamos.", "pt"},
		{"Il cane non è nella casa e anche noi non ci siamo.", "it"},
		{"Koira ei ole talossa ja me emme myöskään ole siellä, mutta se on hyvin.", "fi"},
		{"Mbwa yuko nyumbani na watoto wa shule ni wengi sana katika kijiji hiki.", "sw"},
		{"Con chó không ở trong nhà và chúng tôi cũng không ở đó.", "vi"},
		{"Собака не в доме, и мы тоже не там, что было бы странно.", "ru"},
		{"Кучето не е в къщата и ние също не сме там, но това е така.", "bg"},
		{"कुत्ता घर में नहीं है और हम भी वहां नहीं हैं।", "hi"},
		{"कुत्रा घरात नाही आणि आम्ही पण तिथे नाही आहे.", "mr"},
		{"कुकुर घरमा छैन र हामी पनि त्यहाँ छैनौं भन्ने कुरा हो।", "ne"},
		{"الكلب ليس في المنزل ونحن لسنا هناك أيضا.", "ar"},
		{"سگ در خانه نیست و ما هم آنجا نیستیم که بگوییم.", "fa"},
		{"کتا گھر میں نہیں ہے اور ہم بھی وہاں نہیں ہیں۔", "ur"},
		{"개는 집에 없고 우리도 거기에 없습니다.", "ko"},
		{"สุนัขไม่อยู่ในบ้าน", "th"},
		{"কুকুরটি বাড়িতে নেই।", "bn"},
		{"કૂતરો ઘરમાં નથી.", "gu"},
		{"ਕੁੱਤਾ ਘਰ ਵਿੱਚ ਨਹੀਂ ਹੈ।", "pa"},
		{"ನಾಯಿ ಮನೆಯಲ್ಲಿ ಇಲ್ಲ.", "kn"},
		{"நாய் வீட்டில் இல்லை.", "ta"},
		{"కుక్క ఇంట్లో లేదు.", "te"},
	} {
		if got, ok := detectLanguage(tc.text); !ok || got != tc.want {
			t.Errorf("%q: %q, want %q", tc.text, got, tc.want)
		}
	}
	if _, ok := detectLanguage("1234 !!! ..."); ok {
		t.Error("no letters: detected a language (langdetect raises, and the reference counts the instruction followed)")
	}
}

func FuzzParseIFEval(f *testing.F) {
	f.Add(`{"key": 1, "prompt": "p", "instruction_id_list": ["keywords:frequency"], "kwargs": [{"keyword": "a(", "frequency": 2, "relation": "at least"}]}`, "a( a(")
	f.Add(`{"key": 2, "prompt": "p", "instruction_id_list": ["detectable_format:multiple_sections"], "kwargs": [{"section_spliter": "[", "num_sections": 1}]}`, "[ 1")
	f.Fuzz(func(t *testing.T, s, response string) {
		ps, err := ParseIFEval("f", strings.NewReader(s))
		if err != nil {
			return
		}
		resp := make([]string, len(ps))
		for i := range resp {
			resp[i] = response
		}
		if _, err := ScoreIFEval("f", ps, resp); err != nil {
			t.Fatal(err)
		}
	})
}

// TestIFEvalAgreesOnGPT4Responses: on real responses, the checkers give
// the reference implementation's verdicts, strict and loose.
// testdata/ifeval_gpt4.jsonl holds 16 of the first 18 records (two long
// ones left out) of the reference's output on GPT-4's responses
// (google-research's
// data/input_response_data_gpt4_20231107_145030.jsonl run through
// evaluation_main.py, as stored in Podtech-AI/IFEval:
// data/test_output/eval_results_strict.jsonl @ 5bdf377 and
// eval_results_loose.jsonl @ 0ce5f0f): key, response and the two
// follow_instruction_lists (the loose one for the first nine); the
// prompts and kwargs come from the shared input file. The ninth record is
// followed only loosely (its last line, "[Your Name]", is not lower case).
func TestIFEvalAgreesOnGPT4Responses(t *testing.T) {
	ps, err := LoadIFEval(sdtest.Require(t, "eval/ifeval_input_data.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[int]*IFEvalPrompt{}
	for i := range ps {
		byKey[ps[i].Key] = &ps[i]
	}
	f, err := os.Open("testdata/ifeval_gpt4.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	err = lines("gpt4", f, func(_ int, line string) error {
		var rec struct {
			Key      int    `json:"key"`
			Response string `json:"response"`
			Strict   []bool `json:"strict"`
			Loose    []bool `json:"loose"` // absent: not checked
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return err
		}
		p := byKey[rec.Key]
		if p == nil {
			t.Fatalf("key %d is not in the input file", rec.Key)
		}
		strict, loose := IFEvalFollowed(p, rec.Response)
		for k := range strict {
			n++
			if strict[k] != rec.Strict[k] || (rec.Loose != nil && loose[k] != rec.Loose[k]) {
				t.Errorf("key %d %s: strict %v loose %v, the reference %v %v", rec.Key, p.Instructions[k], strict[k], loose[k], rec.Strict[k], rec.Loose)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 25 {
		t.Errorf("%d instructions checked, want 25", n)
	}
}

// TestIFEvalTaskGenerates: the ifeval task generates a response per
// prompt (no stop sequence, up to ifeval.yaml's 1280 tokens) and scores
// them as ScoreIFEval does.
func TestIFEvalTaskGenerates(t *testing.T) {
	ps, err := ParseIFEval("p.jsonl", strings.NewReader(
		`{"key": 1, "prompt": "Say hi, no commas.", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}`+"\n"+
			`{"key": 2, "prompt": "Wrap it in quotes.", "instruction_id_list": ["startend:quotation", "change_case:english_lowercase"], "kwargs": [{}, {}]}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	completions := map[string]string{"Say hi, no commas.": "hi there, friend", "Wrap it in quotes.": "\"this is the answer\""}
	lm := &cannedLM{byPrompt: completions}
	task := IFEvalTask("p.jsonl", ps)
	r, err := (&Scorer{LM: lm, Tok: byteDecTok{}}).Evaluate(context.Background(), task, TaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ScoreIFEval("p.jsonl", ps, []string{completions["Say hi, no commas."], completions["Wrap it in quotes."]})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range IFEvalMetrics {
		got, ok1 := r.Metric(name)
		w, ok2 := want.Metric(name)
		if !ok1 || !ok2 || got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	if m, _ := r.Metric("prompt_level_strict_acc"); m.Value != 0.5 {
		t.Errorf("prompt_level_strict_acc %v, want 0.5 (the first response has a comma)", m.Value)
	}
	for _, q := range lm.seen {
		if len(q.Until) != 0 || q.MaxTokens != IFEvalMaxTokens {
			t.Errorf("request until %q, %d tokens; want none and %d", q.Until, q.MaxTokens, IFEvalMaxTokens)
		}
	}
	if len(lm.seen) != 2 {
		t.Errorf("%d requests, want 2", len(lm.seen))
	}
}

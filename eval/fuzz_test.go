package eval

import (
	"strings"
	"testing"
)

// The parsers of outside files never panic, and what they accept is a
// task the scorer can take (every item has choices and a gold in range).
func checkTask(t *testing.T, tk *Task, err error) {
	if err != nil {
		return
	}
	for i, it := range tk.Items {
		if len(it.Choices) == 0 || it.Gold < 0 || it.Gold >= len(it.Choices) {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
}

func FuzzParseLAMBADA(f *testing.F) {
	f.Add("{\"text\": \"a b c\"}\nplain words here\n")
	f.Add("{\"text\": 3}\n")
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseLAMBADA("f", strings.NewReader(s))
		checkTask(t, tk, err)
	})
}

func FuzzParseHellaSwag(f *testing.F) {
	f.Add("A: b\n2\nx\ny\nz\nw\n")
	f.Add(`{"activity_label":"a","ctx_a":"b","ctx_b":"c","endings":["1","2","3","4"],"label":"2"}` + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseHellaSwag("f", strings.NewReader(s))
		checkTask(t, tk, err)
	})
}

func FuzzParsePIQA(f *testing.F) {
	f.Add(`{"goal":"g","sol1":"a","sol2":"b"}`+"\n", "1\n")
	f.Add(`{"goal":"g","sol1":"a","sol2":"b","label":0}`+"\n", "")
	f.Fuzz(func(t *testing.T, s, labels string) {
		var lr *strings.Reader
		if labels != "" {
			lr = strings.NewReader(labels)
		}
		var tk *Task
		var err error
		if lr != nil {
			tk, err = ParsePIQA("f", strings.NewReader(s), "l", lr)
		} else {
			tk, err = ParsePIQA("f", strings.NewReader(s), "", nil)
		}
		checkTask(t, tk, err)
	})
}

func FuzzParseMMLUCSV(f *testing.F) {
	f.Add("q,a,b,c,d,A\n\"x, y\",1,2,3,4,D\n")
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ParseMMLUCSV("f", strings.NewReader(s))
		if err == nil {
			tk := &Task{Items: MMLUTask("s", rows, rows)}
			checkTask(t, tk, nil)
		}
	})
}

func FuzzQuiz(f *testing.F) {
	f.Add("{The }Merchant{ of Venice}:\\\nstrain['|e]d:x\nAla|AL:M[iddle{-}Earth|E]\n")
	f.Fuzz(func(t *testing.T, s string) {
		recs, _, err := ParseQuizLines("f", strings.NewReader(s), 0)
		if err != nil {
			return
		}
		for _, r := range recs {
			if len(r) < 2 {
				t.Fatalf("record %q", r)
			}
			QuizExpand(r[0])
		}
		checkTask(t, &Task{Items: QuizItems("f", [2]string{"q", "a"}, recs)}, nil)
	})
}

func FuzzParseSuite(f *testing.F) {
	f.Add(`{"kind":"choice","context":"c","choices":["a","b"],"label":1}` + "\n" + `{"kind":"cloze","context":"c","target":"w"}` + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseSuite("f", strings.NewReader(s))
		if err == nil {
			for _, tk := range ts {
				checkTask(t, tk, nil)
			}
		}
	})
}

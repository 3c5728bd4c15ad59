package main

import (
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"x/a"}
{"Action":"run","Package":"x/a","Test":"TestOK"}
{"Action":"output","Package":"x/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"x/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"x/a","Test":"TestOK"}
{"Action":"run","Package":"x/a","Test":"TestData"}
{"Action":"output","Package":"x/a","Test":"TestData","Output":"=== RUN   TestData\n"}
{"Action":"output","Package":"x/a","Test":"TestData","Output":"    a_test.go:12: shared data \"groundtruth\" not found; skipping\n"}
{"Action":"output","Package":"x/a","Test":"TestData","Output":"--- SKIP: TestData (0.00s)\n"}
{"Action":"skip","Package":"x/a","Test":"TestData"}
{"Action":"run","Package":"x/a","Test":"TestLong"}
{"Action":"output","Package":"x/a","Test":"TestLong","Output":"    a_test.go:30: long check; skipped with -short\n"}
{"Action":"skip","Package":"x/a","Test":"TestLong"}
{"Action":"output","Package":"x/a","Output":"PASS\n"}
{"Action":"output","Package":"x/a","Output":"ok  \tx/a\t0.01s\n"}
{"Action":"pass","Package":"x/a"}
{"Action":"run","Package":"x/b","Test":"TestData2"}
{"Action":"output","Package":"x/b","Test":"TestData2","Output":"    b_test.go:7: shared data \"groundtruth\" not found; skipping\n"}
{"Action":"skip","Package":"x/b","Test":"TestData2"}
{"Action":"run","Package":"x/b","Test":"TestBad"}
{"Action":"output","Package":"x/b","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"x/b","Test":"TestBad","Output":"    b_test.go:9: got 1, want 2\n"}
{"Action":"output","Package":"x/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"x/b","Test":"TestBad"}
{"Action":"output","Package":"x/b","Output":"FAIL\n"}
{"Action":"output","Package":"x/b","Output":"FAIL\tx/b\t0.02s\n"}
{"Action":"fail","Package":"x/b"}
{"ImportPath":"x/c","Action":"build-output","Output":"c.go:3:1: syntax error\n"}
{"ImportPath":"x/c","Action":"build-fail"}
not json: a go vet line
`

func TestSummarize(t *testing.T) {
	var out strings.Builder
	s, err := summarize(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	report(&out, s)
	got := out.String()
	for _, want := range []string{
		"ok  \tx/a\t0.01s\n",
		"    b_test.go:9: got 1, want 2\n--- FAIL: TestBad (0.00s)\n",
		"FAIL\tx/b\t0.02s\n",
		"c.go:3:1: syntax error\n",
		"not json: a go vet line\n",
		"skipped: 3 tests\n",
		`     2  shared data "groundtruth" not found; skipping  (a.TestData, b.TestData2)`,
		"     1  long check; skipped with -short  (a.TestLong)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"--- PASS", "=== RUN", "PASS\n\n", "a_test.go:12"} {
		if strings.Contains(got, not) {
			t.Errorf("output has %q:\n%s", not, got)
		}
	}
	if !s.failed {
		t.Error("a failed test and a failed build were not noticed")
	}
	var none strings.Builder
	s, _ = summarize(strings.NewReader(`{"Action":"pass","Package":"x/a"}`+"\n"), &none)
	if report(&none, s); s.failed || !strings.Contains(none.String(), "skipped: none") {
		t.Errorf("clean run: failed %v, %q", s.failed, none.String())
	}
}

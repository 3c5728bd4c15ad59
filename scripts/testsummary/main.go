// Command testsummary reads `go test -json` on standard input and writes
// what plain `go test` would (each package's ok/FAIL line, the output of
// failed tests, build errors), followed by the number of skipped tests and
// why, grouped by the skip message. scripts/test.sh pipes the suite
// through it so that a skip is never silent.
//
// It exits 1 when any test or package failed, 0 otherwise.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output events
}

// skip is one skipped test and its message.
type skip struct{ pkg, test, reason string }

// summary is what was seen.
type summary struct {
	skips  []skip
	failed bool
}

var location = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

func main() {
	s, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	report(os.Stdout, s)
	if s.failed {
		os.Exit(1)
	}
}

// summarize copies the plain go test output of the stream to w and collects
// the skips.
func summarize(r io.Reader, w io.Writer) (*summary, error) {
	s := &summary{}
	out := map[[2]string][]string{} // (package, test) → its output lines
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go vet or a build error printed as text): pass it on.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			io.WriteString(w, e.Output)
		case "build-fail":
			s.failed = true
		case "output":
			if e.Test == "" {
				// Package lines: ok, FAIL, ? (no test files), panics. Skip the
				// PASS line and the verbose chatter test2json adds.
				if o := strings.TrimSpace(e.Output); o != "PASS" && !strings.HasPrefix(o, "=== ") {
					io.WriteString(w, e.Output)
				}
				continue
			}
			out[key] = append(out[key], e.Output)
		case "fail":
			if e.Test == "" {
				s.failed = true
				continue
			}
			s.failed = true
			for _, o := range out[key] {
				if !strings.HasPrefix(strings.TrimSpace(o), "=== ") {
					io.WriteString(w, o)
				}
			}
			delete(out, key)
		case "skip":
			if e.Test != "" {
				s.skips = append(s.skips, skip{e.Package, e.Test, reason(out[key])})
			}
			delete(out, key)
		case "pass":
			delete(out, key)
		}
	}
	return s, sc.Err()
}

// reason returns the skip message of a test's output: its last logged line,
// without the file:line prefix.
func reason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(lines[i], "\n")
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- ") || strings.HasPrefix(t, "=== ") {
			continue
		}
		return strings.TrimSpace(location.ReplaceAllString(l, ""))
	}
	return "(no message)"
}

// report writes the skip count and the reasons, most frequent first.
func report(w io.Writer, s *summary) {
	if len(s.skips) == 0 {
		fmt.Fprintln(w, "skipped: none")
		return
	}
	by := map[string][]skip{}
	for _, k := range s.skips {
		by[k.reason] = append(by[k.reason], k)
	}
	reasons := make([]string, 0, len(by))
	for r := range by {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if len(by[reasons[i]]) != len(by[reasons[j]]) {
			return len(by[reasons[i]]) > len(by[reasons[j]])
		}
		return reasons[i] < reasons[j]
	})
	fmt.Fprintf(w, "skipped: %d tests\n", len(s.skips))
	for _, r := range reasons {
		ks := by[r]
		names := make([]string, 0, 3)
		for _, k := range ks[:min(len(ks), 3)] {
			names = append(names, k.pkg[strings.LastIndex(k.pkg, "/")+1:]+"."+k.test)
		}
		more := ""
		if len(ks) > 3 {
			more = fmt.Sprintf(", +%d more", len(ks)-3)
		}
		fmt.Fprintf(w, "  %4d  %s  (%s%s)\n", len(ks), r, strings.Join(names, ", "), more)
	}
}

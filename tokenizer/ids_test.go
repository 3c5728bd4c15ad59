package tokenizer

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestReadIDsText(t *testing.T) {
	tests := []struct {
		name, in string
		want     [][]int
	}{
		{"spaces", "1 2 3\n4 5\n", [][]int{{1, 2, 3}, {4, 5}}},
		{"commas", "1,2,3\n4, 5,\t6", [][]int{{1, 2, 3}, {4, 5, 6}}},
		{"crlf", "7 8\r\n9\r\n", [][]int{{7, 8}, {9}}},
		{"empty line", "1\n\n2\n", [][]int{{1}, {}, {2}}},
		{"empty", "", nil},
		{"big", "2147483647\n", [][]int{{2147483647}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadIDs(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("ReadIDs(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestReadIDsLongLine(t *testing.T) {
	seq := make([]int, 100000)
	for i := range seq {
		seq[i] = i
	}
	var buf bytes.Buffer
	if err := WriteIDs(&buf, [][]int{seq, {1}}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIDs(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got[0], seq) {
		t.Fatalf("long line did not round-trip: %d sequences", len(got))
	}
}

func TestIDsRoundTrip(t *testing.T) {
	seqs := [][]int{{0, 1, 2}, {}, {2147483647, 50256}, {42}}
	for _, form := range []string{"text", "binary"} {
		var buf bytes.Buffer
		var err error
		if form == "text" {
			err = WriteIDs(&buf, seqs)
		} else {
			err = WriteIDsBinary(&buf, seqs)
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadIDs(&buf)
		if err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if !slices.EqualFunc(got, seqs, slices.Equal) {
			t.Errorf("%s: got %v, want %v", form, got, seqs)
		}
	}
}

func TestBinaryLayout(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteIDsBinary(&buf, [][]int{{1, 258}}); err != nil {
		t.Fatal(err)
	}
	want := []byte("ACTKIDS\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02\x01\x00\x00")
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("binary form = % x\nwant          % x", buf.Bytes(), want)
	}
}

func TestReadIDsErrors(t *testing.T) {
	bin := func(b ...byte) string { return "ACTKIDS\x00\x01\x00\x00\x00\x00\x00\x00\x00" + string(b) }
	tests := []struct {
		name, in, want string
	}{
		{"word", "1 2\n3 x4 5\n", `line 2, column 3: "x4" is not a token id`},
		{"negative", "-1\n", `line 1, column 1: "-1" is not a token id`},
		{"too big", "2147483648\n", `"2147483648" is not a token id`},
		{"float", "1.5", `"1.5"`},
		{"truncated length", bin(2, 0), "byte 16: binary token-id file: truncated sequence length"},
		{"truncated ids", bin(2, 0, 0, 0, 1, 0, 0, 0), "sequence 0 truncated (1 of 2 ids present)"},
		{"huge length", bin(0xff, 0xff, 0xff, 0xff), "claims 4294967295 ids"},
		{"version", "ACTKIDS\x00\x02\x00\x00\x00\x00\x00\x00\x00", "version 2"},
		{"header", "ACTKIDS\x00\x01", "truncated header"},
		{"id too big", bin(1, 0, 0, 0, 0, 0, 0, 0x80), "byte 20: binary token-id file: id 2147483648 too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadIDs(strings.NewReader(tc.in))
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error = %v, want a *FormatError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestCheckIDs(t *testing.T) {
	if err := CheckIDs([][]int{{0, 9}}, 10); err != nil {
		t.Error(err)
	}
	err := CheckIDs([][]int{{0}, {3, 10}}, 10)
	var re *IDRangeError
	if !errors.As(err, &re) || re.Seq != 1 || re.Pos != 1 || re.ID != 10 {
		t.Errorf("CheckIDs error = %v", err)
	}
}

func FuzzReadIDs(f *testing.F) {
	f.Add([]byte("1 2 3\n4,5\r\n\n"))
	f.Add([]byte("ACTKIDS\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x05\x00\x00\x00"))
	f.Add([]byte("ACTKIDS\x00\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		seqs, err := ReadIDs(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Whatever was read must survive both forms.
		for _, form := range []func(*bytes.Buffer, [][]int) error{
			func(b *bytes.Buffer, s [][]int) error { return WriteIDs(b, s) },
			func(b *bytes.Buffer, s [][]int) error { return WriteIDsBinary(b, s) },
		} {
			var buf bytes.Buffer
			if err := form(&buf, seqs); err != nil {
				t.Fatal(err)
			}
			again, err := ReadIDs(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(again, seqs, slices.Equal) && !(len(again) == 0 && len(seqs) == 0) {
				t.Fatalf("round trip changed %v into %v", seqs, again)
			}
		}
	})
}

package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// rawFile builds a safetensors file from a literal header and n data bytes.
func rawFile(header string, n int) []byte {
	b := make([]byte, 8, 8+len(header)+n)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, n)...)
}

// withLen builds a file whose length prefix is l, followed by rest.
func withLen(l uint64, rest string) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, l)
	return append(b, rest...)
}

const f32a = `"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`

type rejectCase struct {
	name   string
	file   []byte
	tensor string // tensor named by the error
	offset int64  // byte offset, -1 to skip the check
	msg    string // substring of the message
}

var rejectCases = []rejectCase{
	{"truncated below 8 bytes", []byte{1, 2, 3}, "", 0, "too short"},
	{"empty file", nil, "", 0, "too short"},
	{"header length past end", withLen(100, `{}`), "", 0, "past the end of the 10-byte file"},
	{"header length absurd", withLen(1<<40, `{}`), "", 0, "exceeds the 100000000-byte limit"},
	{"header length huge uint64", withLen(^uint64(0), `{}`), "", 0, "exceeds"},
	{"header too short", withLen(1, `{`), "", 8, "too short for a JSON object"},
	{"invalid JSON", rawFile(`{"a":{"dtype":"F32",`, 0), "a", 9, "invalid JSON"},
	{"invalid JSON value", rawFile(`{"a":{"dtype":F32}}`, 0), "", 21, "invalid JSON"},
	{"not an object", rawFile(`[1,2]   `, 0), "", 8, "not a JSON object"},
	{"not UTF-8", rawFile("{\"\xff\":1}", 0), "", 8, "UTF-8"},
	{"unknown dtype", rawFile(`{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}`, 8), "a", 9, `unknown dtype "F12"`},
	{"missing dtype", rawFile(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, 8), "a", 9, `missing "dtype"`},
	{"missing shape", rawFile(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, 8), "a", 9, `missing "shape"`},
	{"missing offsets", rawFile(`{"a":{"dtype":"F32","shape":[2]}}`, 8), "a", 9, `missing "data_offsets"`},
	{"negative dim", rawFile(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), "a", 9, "negative dimension"},
	{"fractional dim", rawFile(`{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, 8), "a", 9, "bad tensor entry"},
	{"shape overflow", rawFile(`{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, 8), "a", 9, "overflows"},
	{"three offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}`, 8), "a", 9, "[begin, end]"},
	{"end before begin", rawFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8), "a", 9, "invalid data_offsets"},
	{"size mismatch", rawFile(`{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8]}}`, 8), "a", 9, "needs 16 bytes but data_offsets [0,8] hold 8"},
	{"out of range", rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, 8), "a", 9, "run past the end of the 8-byte data buffer"},
	{"overlap", rawFile(`{`+f32a+`,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), "b", 62, `overlap tensor "a"`},
	{"gap", rawFile(`{`+f32a+`,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, 16), "b", 62, "gap of 4 bytes after tensor \"a\""},
	{"gap at start", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "a", 9, "gap of 4 bytes after the start"},
	{"trailing data", rawFile(`{`+f32a+`}`, 12), "", int64(8 + len(`{`+f32a+`}`) + 8), "4 bytes of data after the last tensor"},
	{"duplicate name", rawFile(`{`+f32a+`,`+f32a+`}`, 8), "a", 62, "duplicate name in header (first at byte offset 9)"},
	{"duplicate metadata", rawFile(`{"__metadata__":{},"__metadata__":{}}`, 0), "__metadata__", 27, "duplicate"},
	{"metadata not strings", rawFile(`{"__metadata__":{"n":1}}`, 0), "__metadata__", 9, "must map strings to strings"},
	{"garbage after JSON", rawFile(`{}x`, 0), "", 10, "after the JSON header"},
	{"NUL padding", rawFile("{}\x00\x00\x00\x00\x00\x00", 0), "", 10, "padding must be spaces"},
	{"entry not an object", rawFile(`{"a":[1]}`, 0), "a", 9, "bad tensor entry"},
}

func TestReadHeaderRejects(t *testing.T) {
	tests := rejectCases
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHeader(bytes.NewReader(tc.file), int64(len(tc.file)), "bad.safetensors")
			if err == nil {
				t.Fatalf("accepted: %+v", h)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *FormatError", err, err)
			}
			if fe.File != "bad.safetensors" || fe.Tensor != tc.tensor || (tc.offset >= 0 && fe.Offset != tc.offset) || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("got %#v\nwant tensor %q offset %d msg containing %q", fe, tc.tensor, tc.offset, tc.msg)
			}
			s := err.Error()
			if !strings.Contains(s, "bad.safetensors") || !strings.Contains(s, "byte offset") || (tc.tensor != "" && !strings.Contains(s, `"`+tc.tensor+`"`)) {
				t.Errorf("Error() = %q does not name the file, tensor and offset", s)
			}
		})
	}
}

func TestReadHeaderAccepts(t *testing.T) {
	tests := []struct {
		name  string
		file  []byte
		names []string // storage order
	}{
		{"empty object", rawFile(`{}`, 0), nil},
		{"empty with padding", rawFile(`{}      `, 0), nil},
		{"whitespace JSON", rawFile(" { \"a\" : {\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]} }\n", 3), []string{"a"}},
		{"unordered entries", rawFile(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"a":{"dtype":"I16","shape":[1],"data_offsets":[0,2]}}`, 3), []string{"a", "b"}},
		{"zero-size tensors", rawFile(`{"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"y":{"dtype":"F32","shape":[3,0],"data_offsets":[1,1]}}`, 1), []string{"z", "a", "y"}},
		{"scalar", rawFile(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 8), []string{"s"}},
		{"unknown keys ignored", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":true}}`, 1), []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHeader(bytes.NewReader(tc.file), int64(len(tc.file)), "ok.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ti := range h.Tensors {
				got = append(got, ti.Name)
				if ti.Offset < h.DataStart || ti.Offset+ti.Size > int64(len(tc.file)) {
					t.Errorf("%s: range [%d,%d) outside data", ti.Name, ti.Offset, ti.Offset+ti.Size)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.names, ",") {
				t.Errorf("order %v, want %v", got, tc.names)
			}
		})
	}
}

package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"id", "model", "kv_dtype", "max_num_seqs", "max_batched_tokens", "context", "memory_gib", "bandwidth_gbs"}
	for _, tc := range []struct {
		name, want string
		near       bool
	}{
		{"max_num_seq", "max_num_seqs", true},
		{"kv_type", "kv_dtype", true},
		{"Max-Num-Seqs", "max_num_seqs", true},
		{"memory_gb", "memory_gib", true},
		{"contxt", "context", true},
		{"bandwith_gbs", "bandwidth_gbs", true},
		{"colour", "", false},
		{"zzzzzzzzzzzzzzzzzzz", "", false},
	} {
		got, near := Closest(tc.name, known)
		if near != tc.near || near && got != tc.want {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.name, got, near, tc.want, tc.near)
		}
	}
	if _, ok := Closest("x", nil); ok {
		t.Error("a suggestion from no names")
	}
	if got := Unknown("column", "kv_type", known); got != `unknown column "kv_type" (did you mean "kv_dtype"?)` {
		t.Errorf("Unknown: %s", got)
	}
	if got := Unknown("key", "colour", []string{"a", "b"}); got != `unknown key "colour" (known: a, b)` {
		t.Errorf("Unknown: %s", got)
	}
}

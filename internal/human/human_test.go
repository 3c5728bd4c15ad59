package human

import (
	"math"
	"testing"
)

func TestThousands(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {-1234, "-1,234"}, {80512, "80,512"}, {6738415616, "6,738,415,616"},
		{-999999, "-999,999"}, {math.MinInt64, "-9,223,372,036,854,775,808"}} {
		if got := Thousands(tc.n); got != tc.want {
			t.Errorf("Thousands(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {524288, "512.0 KiB"}, {1 << 20, "1.00 MiB"}, {3407872, "3.25 MiB"},
		{15 << 30, "15.00 GiB"}} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

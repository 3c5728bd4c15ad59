package human

import (
	"math"
	"testing"
	"time"
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

func TestCount(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {512, "512"}, {4000, "4000"}, {25600, "25.6K"}, {3168384, "3.2M"}, {-2.5e6, "-2.5M"},
		{8030261248, "8.03B"}, {13.46, "13.5"}, {150.4, "150"}, {0.001234, "0.00123"},
	} {
		if got := Count(c.v); got != c.want {
			t.Errorf("Count(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{1234 * time.Millisecond, "1.2s"}, {9949 * time.Millisecond, "9.9s"}, {12600 * time.Millisecond, "13s"}, {95 * time.Second, "1m35s"},
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// Package human formats numbers for people: counts with thousands
// separators, counts with an SI suffix, byte sizes in binary units and
// durations rounded for a progress line. It is the one home of these
// formatters for the commands, the search's text, the progress display and
// the report.
package human

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Thousands writes n with comma thousands separators: 6738415616 →
// "6,738,415,616", -1234 → "-1,234".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Bytes writes a size in the largest binary unit it reaches: "512 B",
// "1.5 KiB", "3.25 MiB", "13.96 GiB" (two decimals from MiB up, one for
// KiB).
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Count writes a count with a K, M or B suffix from ten thousand up (one
// decimal, two for billions): 3168384 → "3.2M", 8030261248 → "8.03B",
// 25600 → "25.6K", 4000 → "4000"; a fraction under a hundred keeps three
// significant digits (a rate of 13.46 → "13.5").
func Count(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fB", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fK", v/1e3)
	case a == math.Trunc(a) || a >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// Duration rounds d for a progress line: to 0.1 s under 10 s, else to the
// second.
func Duration(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

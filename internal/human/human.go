// Package human formats numbers for people: counts with thousands
// separators and byte sizes in binary units. It is the one home of these
// formatters for the commands and the report.
package human

import (
	"fmt"
	"strconv"
	"strings"
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

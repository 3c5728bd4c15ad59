package search

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/internal/human"
)

// UnitError is a budget whose value or unit cannot be read; it names the
// budget (Name, e.g. BudgetMemory) and says which units are valid.
type UnitError struct {
	Name, Value, Valid string
}

func (e *UnitError) Error() string { return e.Spell(nil) }

// Spell returns the message with the budget spelled by spell.
func (e *UnitError) Spell(spell func(name string) string) string {
	return fmt.Sprintf("%s %q: want a positive number with a unit, one of %s", Speller(spell).spell(e.Name), e.Value, e.Valid)
}

// splitUnit splits "13.96GiB" into 13.96 and "gib" (lower case, spaces
// removed).
func splitUnit(s string) (float64, string, bool) {
	s = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-' || s[i+1] == '+') || (s[i] == '-' || s[i] == '+') && i > 0 && s[i-1] == 'e') {
		i++
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, "", false
	}
	return v, s[i:], true
}

var byteUnits = map[string]float64{
	"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseBytes reads a memory size: "13.96GiB", "16GB", "900MiB". A unit is
// required: a bare number could be bytes, MB or GiB.
func ParseBytes(name, s string) (float64, error) {
	v, u, ok := splitUnit(s)
	f, known := byteUnits[u]
	if !ok || !known {
		return 0, &UnitError{name, s, "B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024)"}
	}
	return v * f, nil
}

var timeUnits = map[string]float64{"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "min": 60}

// ParseSeconds reads a duration: "500ms", "11.5s", "40ms", "2min".
func ParseSeconds(name, s string) (float64, error) {
	v, u, ok := splitUnit(s)
	f, known := timeUnits[u]
	if !ok || !known {
		return 0, &UnitError{name, s, "us, ms, s, min"}
	}
	return v * f, nil
}

// Throughput is a rate budget in output tokens or in requests per second.
type Throughput struct {
	TokensPerS, RequestsPerS float64
}

// ParseThroughput reads "2000tok/s" (output tokens per second) or "3req/s"
// (requests per second); "/min" is accepted for both.
func ParseThroughput(name, s string) (Throughput, error) {
	v, u, ok := splitUnit(s)
	per := 1.0
	switch {
	case strings.HasSuffix(u, "/s"):
		u = strings.TrimSuffix(u, "/s")
	case strings.HasSuffix(u, "/min"):
		u, per = strings.TrimSuffix(u, "/min"), 60
	default:
		ok = false
	}
	if ok {
		switch u {
		case "tok", "tokens", "token":
			return Throughput{TokensPerS: v / per}, nil
		case "req", "requests", "request":
			return Throughput{RequestsPerS: v / per}, nil
		}
	}
	return Throughput{}, &UnitError{name, s, "tok/s, req/s (or /min)"}
}

var countUnits = map[string]float64{"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}

// ParseCount reads a parameter count: "3B", "500M", "7.5K", "123456".
func ParseCount(name, s string) (float64, error) {
	v, u, ok := splitUnit(s)
	f, known := countUnits[u]
	if !ok || !known {
		return 0, &UnitError{name, s, "a plain count or K, M, B (10^9), T"}
	}
	return v * f, nil
}

// FormatBytes prints bytes in GiB (or MiB below 1 GiB).
func FormatBytes(b float64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", b/(1<<30))
}

// FormatSeconds prints a time in ms below 10 s, else in s.
func FormatSeconds(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

// FormatCount prints a parameter count with a K/M/B suffix (human.Count).
func FormatCount(n float64) string { return human.Count(n) }

package workload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate reads a request rate as a user writes it (the --rate flag, a
// scenario file's request_rate column): requests per second, "inf" for an
// offline run (every request present at time zero), and "" or "0" for a
// closed loop (no rate).
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "0" {
		return 0, nil
	}
	if s == "inf" || s == "+inf" || s == "infinity" {
		return math.Inf(1), nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("request rate %q must be a positive number of requests per second or inf", s)
	}
	return r, nil
}

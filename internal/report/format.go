package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"replab/internal/stats"
)

// group prints an integer with thousands separators: 57,524.
func group(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	s := strconv.FormatFloat(math.Round(math.Abs(v)), 'f', 0, 64)
	var b strings.Builder
	if v < 0 && math.Round(v) != 0 {
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

// ms prints milliseconds with two decimals.
func ms(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// fmtTable prints a table value: whole numbers with separators from
// 1,000 up, else three significant digits or two decimals.
func fmtTable(v float64) string {
	if math.Abs(v) >= 1000 {
		return group(v)
	}
	return fmtNum(v)
}

func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " %"
}

func ciText(c *stats.CI) string {
	if c == nil || c.N < 2 {
		return ""
	}
	hw := ms(c.HalfWidth)
	if c.HalfWidth >= 100 {
		hw = group(c.HalfWidth)
	}
	return fmt.Sprintf("± %s (%.0f %% confidence, n = %d)", hw, 100*c.Level, c.N)
}

package postgres

import (
	"math"
	"strings"
	"testing"
)

func TestChecksumQuery(t *testing.T) {
	t.Run("quotes the table name", func(t *testing.T) {
		for table, want := range map[string]string{
			"per":          `FROM "per" AS replab_row`,
			`Odd "name"`:   `FROM "Odd ""name""" AS replab_row`,
			"x; DROP y --": `FROM "x; DROP y --" AS replab_row`,
		} {
			if q := checksumSQL(table); !strings.HasSuffix(q, want) {
				t.Errorf("checksumSQL(%q) = %s, want it to end with %s", table, q, want)
			}
		}
	})
	t.Run("sums a 64-bit hash of each row's text", func(t *testing.T) {
		q := checksumSQL("per")
		if !strings.Contains(q, "sum(('x' || left(md5(replab_row::text), 16))::bit(64)::bigint)") {
			t.Errorf("query %s does not sum row hashes", q)
		}
	})
	t.Run("the sum wraps to 64 bits", func(t *testing.T) {
		for in, want := range map[string]int64{
			"0":                     0,
			"-1":                    -1,
			"18446744073709551615":  -1,
			"18446744073709551616":  0,
			"9223372036854775807":   math.MaxInt64,
			"9223372036854775808":   math.MinInt64,
			"-9223372036854775809":  math.MaxInt64,
			"36893488147419103233":  1, // 2·2^64 + 1
			"-18446744073709551617": -1,
		} {
			got, err := foldSum(in)
			if err != nil || got != want {
				t.Errorf("foldSum(%s) = %d, %v; want %d", in, got, err, want)
			}
		}
		if _, err := foldSum("1.5"); err == nil {
			t.Error("foldSum(1.5): no error")
		}
	})
	t.Run("a table name is found as written or folded to lower case", func(t *testing.T) {
		have := []string{"Mixed", "per"}
		for in, want := range map[string]string{"per": "per", "PER": "per", "Mixed": "Mixed", "mixed": "", "item": ""} {
			got, ok := relName(in, have)
			if got != want || ok != (want != "") {
				t.Errorf("relName(%q) = %q, %t; want %q", in, got, ok, want)
			}
		}
	})
}

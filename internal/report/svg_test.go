package report

import (
	"math"
	"slices"
	"strings"
	"testing"

	"replab/internal/units"
)

func tickLabels(ts []tick) []string {
	var out []string
	for _, t := range ts {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		got    []tick
		labels []string
	}{
		{"round steps on a linear axis", linearTicks(0, 20, 6, fmtNum), []string{"0", "5", "10", "15", "20"}},
		{"2.5 only as 25, 250…", linearTicks(0, 1500, 5, fmtNum), []string{"0", "250", "500", "750", "1000", "1250", "1500"}},
		{"thousands shorten from 10k", linearTicks(0, 80000, 5, fmtNum), []string{"0", "20k", "40k", "60k", "80k"}},
		{"no 2.5 below 10", linearTicks(0, 10, 4, fmtNum), []string{"0", "2", "4", "6", "8", "10"}},
		{"log: decades over a wide range", logTicks(0.3, 2000, fmtNum), []string{"1", "10", "100", "1000"}},
		{"log: 1, 2, 5 over two decades", logTicks(0.4, 60, fmtNum), []string{"0.5", "1", "2", "5", "10", "20", "50"}},
		{"log: every integer, and 1.5 and 2.5, within a decade", logTicks(35, 180, fmtNum), []string{"40", "50", "60", "70", "80", "90", "100", "150"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tickLabels(tc.got); !slices.Equal(got, tc.labels) {
				t.Errorf("ticks %q, want %q", got, tc.labels)
			}
		})
	}
}

func TestNumberFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{fmtNum(0), "0"}, {fmtNum(0.25), "0.25"}, {fmtNum(3.14159), "3.14"}, {fmtNum(12.345), "12.3"},
		{fmtNum(1500), "1500"}, {fmtNum(25000), "25k"}, {fmtNum(3.2e6), "3.2M"},
		{group(57524), "57,524"}, {group(-1234567), "-1,234,567"}, {group(math.NaN()), "—"},
		{units.Bytes(512), "512 B"}, {units.Bytes(256216), "250.2 KiB"}, {units.Bytes(47.5 * (1 << 20)), "47.5 MiB"},
		{units.Bits(948600), "948.6 kbit/s"}, {units.Bits(50e6), "50 Mbit/s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestLineChart(t *testing.T) {
	t.Run("a gap (NaN) starts a new subpath", func(t *testing.T) {
		c := &lineChart{ID: "c", X: freeAxis("x"), Y: freeAxis("y"),
			Lines: []line{{Name: "a", Pts: []point{{0, 1}, {1, 2}, {2, math.NaN()}, {3, 1}, {4, 2}}}}}
		svg := c.figure().SVG
		m := dataPathD.FindStringSubmatch(svg)
		if m == nil || strings.Count(m[1], "M") != 2 {
			t.Errorf("path %q, want two subpaths", m)
		}
	})
	t.Run("labels are escaped", func(t *testing.T) {
		c := &lineChart{ID: "c", Title: `<b>&"`, X: freeAxis("a<b"), Y: freeAxis("y"), Lines: []line{{Name: "<i>", Pts: []point{{0, 1}, {1, 2}}}}}
		f := c.figure()
		if strings.Contains(f.SVG, "<b>") || strings.Contains(f.SVG, "<i>") || !strings.Contains(f.SVG, "a&lt;b") {
			t.Errorf("unescaped text in %s", f.SVG)
		}
	})
	t.Run("log axes leave out values that are not positive", func(t *testing.T) {
		c := &lineChart{ID: "c", X: freeAxis("x"), Y: freeAxis("y"), Lines: []line{{Pts: []point{{0, 50}, {1, 50}, {10, 90}, {100, 100}}}}}
		c.X.Log = true
		m := dataPathD.FindStringSubmatch(c.figure().SVG)
		if m == nil || strings.Count(m[1], "L") != 2 {
			t.Errorf("path %q, want the 3 positive points", m)
		}
	})
}

func TestBarChartStacksPerCategory(t *testing.T) {
	c := &barChart{ID: "b", Categories: []string{"p1 · backend", "e1 · replay"},
		Stacks: []bars{{Name: "user", Values: []float64{3, 1}}, {Name: "io", Values: []float64{1, 0}}}}
	f := c.figure()
	if n := strings.Count(f.SVG, `class="data bar"`); n != 3 {
		t.Errorf("%d bars, want 3 (no bar for a zero)", n)
	}
	if len(f.Legend) != 2 || !f.Legend[0].Box {
		t.Errorf("legend %+v", f.Legend)
	}
}

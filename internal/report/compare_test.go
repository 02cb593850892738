package report

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	read := func(t *testing.T, dirs ...string) *Comparison {
		t.Helper()
		var rs []*Results
		for _, d := range dirs {
			r, err := ReadResults(d)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		c, err := Compare(rs, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	row := func(t *testing.T, c *Comparison, metric string) CompareRow {
		t.Helper()
		for _, r := range c.Rows {
			if r.Metric == metric {
				return r
			}
		}
		t.Fatalf("no row %q", metric)
		return CompareRow{}
	}

	t.Run("repetitions on disk are tested with Welch's t-test", func(t *testing.T) {
		c := read(t, "testdata/reps-async", "testdata/reps-sync")
		tpm := row(t, c, "tpm")
		if tpm.Values[0].N != 3 || tpm.Diffs[1] == nil || !strings.HasPrefix(tpm.Diffs[1].Method, "Welch") {
			t.Errorf("tpm row %+v, diff %+v", tpm, tpm.Diffs[1])
		}
		// sync waits a round trip to eu for every commit: 3 ms against 80
		if p50 := row(t, c, "commit p50 ms"); !p50.Diffs[1].Significant || p50.Verdicts[1] != "significant (p < 0.001)" {
			t.Errorf("commit p50: %q", p50.Verdicts[1])
		}
		if r := tpm.Values[1].Value / tpm.Values[0].Value; math.Abs(r-tpm.Diffs[1].Ratio) > 1e-9 {
			t.Errorf("ratio %v, Diff says %v", r, tpm.Diffs[1].Ratio)
		}
	})
	t.Run("repetitions known only from summary.json's ci are tested the same", func(t *testing.T) {
		var dirs []string
		for _, d := range []string{"reps-async", "reps-sync"} {
			dir := fixture(t, d)
			for _, rep := range []string{"rep-01", "rep-02", "rep-03"} {
				if err := os.RemoveAll(filepath.Join(dir, rep)); err != nil {
					t.Fatal(err)
				}
			}
			dirs = append(dirs, dir)
		}
		full := read(t, "testdata/reps-async", "testdata/reps-sync")
		c := read(t, dirs...)
		for _, m := range []string{"tpm", "commit p99 ms", "lag a1 p50 ms"} {
			got, want := row(t, c, m), row(t, full, m)
			if got.Verdicts[1] != want.Verdicts[1] {
				t.Errorf("%s: %q from the CIs, %q from the repetitions", m, got.Verdicts[1], want.Verdicts[1])
			}
			if math.Abs(got.Values[1].Value-want.Values[1].Value) > 1e-6 {
				t.Errorf("%s: mean %v from the CIs, %v from the repetitions", m, got.Values[1].Value, want.Values[1].Value)
			}
		}
	})
	t.Run("a single run is not testable", func(t *testing.T) {
		c := read(t, "testdata/run", "testdata/reps-async")
		for _, r := range c.Rows {
			if r.Verdicts[1] != "n=1: not testable" || r.Diffs[1] != nil {
				t.Errorf("%s: %q", r.Metric, r.Verdicts[1])
			}
		}
	})
	t.Run("bytes per transaction appears when a run has it", func(t *testing.T) {
		c := read(t, "testdata/run", withoutMonitors(t))
		r := row(t, c, "bytes / transaction")
		if !r.Values[0].OK || r.Values[1].OK || ratioText(r.Values[0], r.Values[1]) != "—" {
			t.Errorf("bytes row %+v", r)
		}
	})
}

func TestColumnLabel(t *testing.T) {
	for i, want := range map[int]string{0: "A", 1: "B", 25: "Z", 26: "AA", 27: "AB", 52: "BA"} {
		if got := columnLabel(i); got != want {
			t.Errorf("columnLabel(%d) = %q, want %q", i, got, want)
		}
	}
}

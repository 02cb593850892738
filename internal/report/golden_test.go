package report

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"testing"
)

// golden compares got with testdata/name (go test -update rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// copyDir copies a directory tree.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fixture copies testdata/name to a temporary directory (reports are
// written into it) and returns its path.
func fixture(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	copyDir(t, filepath.Join("testdata", name), dst)
	return dst
}

// withoutMonitors is testdata/run as replab wrote it before the monitors:
// no roles.csv or replication.csv, no monitor fields in summary.json.
func withoutMonitors(t *testing.T) string {
	t.Helper()
	dir := fixture(t, "run")
	for _, f := range []string{"roles.csv", "replication.csv"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	var sum map[string]json.RawMessage
	readJSON(t, filepath.Join(dir, "summary.json"), &sum)
	for _, k := range []string{"links", "bytes_per_transaction", "roles", "io_wait_measured", "replication", "verdicts", "monitor"} {
		delete(sum, k)
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustRead(t *testing.T, dir string) *Results {
	t.Helper()
	r, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) > 0 {
		t.Fatalf("problems reading %s:\n%s", dir, strings.Join(r.Problems, "\n"))
	}
	return r
}

func TestPrintSummaryGolden(t *testing.T) {
	for _, tc := range []struct{ name, dir string }{
		{"a single run", "run"},
		{"repetitions with confidence intervals", "reps-async"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRead(t, filepath.Join("testdata", tc.dir))
			var b bytes.Buffer
			PrintSummary(&b, r.Summary)
			golden(t, "summary-"+tc.dir+".golden", b.Bytes())
		})
	}
}

func TestCompareGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dirs   []string
		golden string
	}{
		{"repetitions are tested, a single run is not", []string{"reps-async", "reps-sync", "run"}, "compare.golden"},
		{"two single runs", []string{"run", "sweep/p02"}, "compare-single.golden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs []*Results
			for _, d := range tc.dirs {
				r := mustRead(t, filepath.Join("testdata", d))
				r.Dir = d // stable paths in the output
				rs = append(rs, r)
			}
			c, err := Compare(rs, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			PrintCompare(&b, c)
			golden(t, tc.golden, b.Bytes())
		})
	}
}

package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadResults(t *testing.T) {
	t.Run("a run: every file it wrote", func(t *testing.T) {
		dir := filepath.Join("testdata", "run")
		r := mustRead(t, dir)
		if r.Summary.Name != "quickstart" || r.Env == nil || r.Env.EngineVersion != "15.18" {
			t.Errorf("summary or environment not read: %q, env %+v", r.Summary.Name, r.Env)
		}
		rows := func(name string) int { return csvRows(t, filepath.Join(dir, name)) }
		for _, c := range []struct {
			file string
			n    int
		}{{"series.csv", len(r.Series)}, {"lag.csv", len(r.Lag)}, {"links.csv", len(r.Links)},
			{"roles.csv", len(r.Roles)}, {"replication.csv", len(r.Replication)}} {
			if want := rows(c.file); c.n != want || c.n == 0 {
				t.Errorf("%s: %d rows read, %d in the file", c.file, c.n, want)
			}
		}
		if r.Series[0].T != 1 || r.Series[0].Phase != "warmup" || !(r.Series[0].Commits > 0) {
			t.Errorf("series.csv first row %+v", r.Series[0])
		}
		tags := sortedKeys(r.Hists)
		if want := []string{"commit_latency", "lag_a1", "lag_e1", "type_update"}; !slices.Equal(tags, want) {
			t.Errorf("latency.hlog tags %q, want %q", tags, want)
		}
		if n := r.Hists["commit_latency"].TotalCount(); n != r.Summary.Transactions {
			t.Errorf("commit_latency holds %d values, summary says %d transactions", n, r.Summary.Transactions)
		}
		if r.IsSweep() || r.IsRepetitions() {
			t.Error("a single run reads as a sweep or repetitions")
		}
		s := r.Summary
		if !(s.BytesPerTransaction > 0) || len(s.Links) != 4 || len(s.Roles["p1"]) == 0 || s.Verdicts["e1"] == "" {
			t.Errorf("monitor fields not read: bytes/txn %v, %d links, roles %v, verdicts %v", s.BytesPerTransaction, len(s.Links), s.Roles, s.Verdicts)
		}
	})
	t.Run("repetitions: the aggregate and each rep-NN", func(t *testing.T) {
		r := mustRead(t, filepath.Join("testdata", "reps-async"))
		if !r.IsRepetitions() || len(r.Reps) != 3 || r.Reps[2].Summary.TPM != r.Summary.Repetitions[2].TPM {
			t.Fatalf("repetitions not read: %d reps", len(r.Reps))
		}
		if r.Summary.TPMCI == nil || r.Summary.TPMCI.N != 3 {
			t.Errorf("tpm_ci %+v", r.Summary.TPMCI)
		}
	})
	t.Run("a sweep: sweep.json and a directory per point", func(t *testing.T) {
		r := mustRead(t, filepath.Join("testdata", "sweep"))
		if !r.IsSweep() || r.Summary != nil || len(r.Points) != 4 || r.Points[1].Summary.Scheme != "sync" {
			t.Fatalf("sweep not read: %+v", r.Sweep)
		}
		if r.Name() != "qs-sweep" {
			t.Errorf("name %q", r.Name())
		}
	})
	t.Run("a malformed summary.json is an error naming it", func(t *testing.T) {
		dir := fixture(t, "run")
		patchSummary(t, dir, func(m map[string]any) { m["tpm"] = "fast" })
		if _, err := ReadResults(dir); err == nil || !strings.Contains(err.Error(), "summary.json") {
			t.Errorf("error %v, want one naming summary.json", err)
		}
	})
	t.Run("an unreadable CSV is a problem; the rest still reads", func(t *testing.T) {
		dir := fixture(t, "run")
		if err := os.WriteFile(filepath.Join(dir, "lag.csv"), []byte("t_s,\"replica\n1,\"a"), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], "lag.csv") || len(r.Series) == 0 {
			t.Errorf("problems %q, %d series rows", r.Problems, len(r.Series))
		}
		var b bytes.Buffer
		if err := WriteHTML(&b, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), `id="problems"`) || !strings.Contains(b.String(), "lag.csv") {
			t.Error("the page does not list the unreadable file")
		}
	})
	t.Run("a column missing from a CSV reads as not a number", func(t *testing.T) {
		dir := fixture(t, "run")
		if err := os.WriteFile(filepath.Join(dir, "series.csv"), []byte("t_s,phase,commits\n1,measure,10\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := mustRead(t, dir)
		if len(r.Series) != 1 || r.Series[0].Commits != 10 || !math.IsNaN(r.Series[0].P99Ms) {
			t.Errorf("series %+v", r.Series)
		}
	})
	t.Run("not a results directory", func(t *testing.T) {
		if _, err := ReadResults(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no summary.json") {
			t.Errorf("error %v", err)
		}
	})
}

// csvRows counts a CSV file's rows after the header.
func csvRows(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(strings.TrimSpace(string(b)), "\n")
}

// patchSummary edits a results directory's summary.json.
func patchSummary(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "summary.json")
	var m map[string]any
	readJSON(t, path, &m)
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunPageSaysWhyARunIsIncomplete(t *testing.T) {
	dir := fixture(t, "run")
	patchSummary(t, dir, func(m map[string]any) { m["complete"] = false; m["stop_reason"] = "interrupted (Ctrl-C) at 12 s" })
	var b bytes.Buffer
	if err := WriteHTML(&b, mustRead(t, dir)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `<span class="badge bad">incomplete: interrupted (Ctrl-C) at 12 s</span>`) {
		t.Error("the heading does not say the run is incomplete and why")
	}
}

func TestSweepPageShowsAPointThatWasNotMeasured(t *testing.T) {
	dir := fixture(t, "sweep")
	var sw map[string]any
	readJSON(t, filepath.Join(dir, "sweep.json"), &sw)
	pts := sw["points"].([]any)
	last := pts[len(pts)-1].(map[string]any)
	delete(last, "summary")
	sw["complete"] = false
	b, _ := json.Marshal(sw)
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "p04")); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteHTML(&out, r); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{"not measured", "incomplete: 3 of the points measured", `id="problems"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not show %q", want)
		}
	}
	if strings.Contains(page, "NaN") {
		t.Error("page shows NaN")
	}
}

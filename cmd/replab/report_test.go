package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportData is internal/report's test data: real results directories.
const reportData = "../../internal/report/testdata"

// copyResults copies a results directory of reportData into a temporary
// directory, where reports can be written.
func copyResults(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join(reportData, name)
	dst := filepath.Join(t.TempDir(), filepath.Base(name))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestReportCommand(t *testing.T) {
	t.Run("writes DIR/report.html and prints its path", func(t *testing.T) {
		dir := copyResults(t, "run")
		var out bytes.Buffer
		if err := cmdReport(context.Background(), []string{dir}, &out); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, "report.html")
		if got := strings.TrimSpace(out.String()); got != want {
			t.Errorf("printed %q, want %q", got, want)
		}
		b, err := os.ReadFile(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("<svg")) {
			t.Error("report has no chart")
		}
	})
	t.Run("a sweep also gets a report per point", func(t *testing.T) {
		dir := copyResults(t, "sweep")
		var out bytes.Buffer
		if err := cmdReport(context.Background(), []string{dir}, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "and 4 report(s)") {
			t.Errorf("output %q does not mention the points' reports", out.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "p03", "report.html")); err != nil {
			t.Error(err)
		}
	})
	t.Run("refuses a directory that is not a results directory", func(t *testing.T) {
		err := cmdReport(context.Background(), []string{t.TempDir()}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "summary.json") {
			t.Errorf("error %v, want one about summary.json", err)
		}
	})
	t.Run("wants exactly one directory", func(t *testing.T) {
		if err := cmdReport(context.Background(), nil, &bytes.Buffer{}); err == nil {
			t.Error("no error without a directory")
		}
	})
}

func TestCompareCommand(t *testing.T) {
	t.Run("prints the table and writes the HTML page", func(t *testing.T) {
		a, b := copyResults(t, "reps-async"), copyResults(t, "reps-sync")
		page := filepath.Join(t.TempDir(), "cmp.html")
		var out bytes.Buffer
		if err := cmdCompare(context.Background(), []string{a, b, "--html", page}, &out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"B vs A", "significant (p < 0.001)", page} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output does not contain %q:\n%s", want, out.String())
			}
		}
		html, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(html, []byte("<svg")) {
			t.Error("comparison page has no chart")
		}
	})
	t.Run("refuses a sweep", func(t *testing.T) {
		err := cmdCompare(context.Background(), []string{filepath.Join(reportData, "run"), filepath.Join(reportData, "sweep")}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "is a sweep") {
			t.Errorf("error %v, want one saying it is a sweep", err)
		}
	})
	t.Run("wants two directories", func(t *testing.T) {
		if err := cmdCompare(context.Background(), []string{filepath.Join(reportData, "run")}, &bytes.Buffer{}); err == nil {
			t.Error("no error with one directory")
		}
	})
}

// Package workloadtest holds what the workloads' tests share: building a
// workload from option lines through the registry, running it through
// replab run's code on the fake engine, and keeping docs/workloads.md in
// step with a workload. Only tests import it.
package workloadtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/fake"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/workload"
)

// Spec is a valid spec whose [workload] is kind with the given option
// lines and run seed.
func Spec(kind string, seed int, options string) string {
	return fmt.Sprintf(`[lab]
name = "unit"
[site.db]
[site.client]
[[link]]
sites = ["db", "client"]
delay = "1ms"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
[workload]
kind = %q
%s
[run]
seed = %d
`, kind, options, seed)
}

// Build makes f's workload from option lines in dialect, as replab would;
// an option error comes back as the registry reports it.
func Build(t testing.TB, f workload.Factory, seed int, options string, dialect engine.Dialect) (workload.Workload, error) {
	t.Helper()
	s, err := spec.Parse("unit.toml", []byte(Spec(f.Kind, seed, options)))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return workload.NewRegistry(f).For(s, dialect)
}

// CheckDocs fails unless docs/workloads.md (at docPath) has a table row
// for every option and at least minExamples TOML examples of f's kind,
// each of which validates (with its engine from engines) and builds. An
// example without [lab] is a [workload] table, checked inside Spec.
func CheckDocs(t *testing.T, engines *engine.Registry, docPath string, f workload.Factory, options []string, minExamples int) {
	t.Helper()
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, o := range options {
		if !strings.Contains(doc, "| `"+o+"` |") {
			t.Errorf("docs/workloads.md has no row for option `%s`", o)
		}
	}
	kindLine := fmt.Sprintf("kind = %q", f.Kind)
	examples := 0
	for i, b := range strings.Split(doc, "```toml\n")[1:] {
		b = b[:strings.Index(b, "```")]
		if !strings.Contains(b, kindLine) {
			continue
		}
		examples++
		if !strings.Contains(b, "[lab]") {
			b = Spec(f.Kind, 1, strings.TrimPrefix(strings.TrimSpace(b), "[workload]\n"+kindLine+"\n"))
		}
		s, err := spec.Parse("workloads.md", []byte(b))
		if err != nil {
			t.Errorf("block %d: %v", i+1, err)
			continue
		}
		e, err := engines.For(s)
		if err != nil {
			t.Errorf("block %d: %v", i+1, err)
		}
		dialect := engine.Postgres // a block without [engine] is wrapped for PostgreSQL
		if e != nil {
			dialect = engine.DialectOf(e)
		}
		if _, err := workload.NewRegistry(f).For(s, dialect); err != nil {
			t.Errorf("block %d: %v", i+1, err)
		}
	}
	if examples < minExamples {
		t.Errorf("%d %s examples in docs/workloads.md, want at least %d", examples, f.Kind, minExamples)
	}
}

// RunOnFake runs f's workload with the given [workload] option lines
// through replab run's code, in this process, on the fake engine (a
// primary and a standby in two sites, two users, 200 ms of warmup and 1 s
// measured: no root needed), and returns summary.json and the run's log.
func RunOnFake(t *testing.T, f workload.Factory, options string) (summary []byte, log string) {
	t.Helper()
	summary, _, log = RunOnFakeWith(t, f, options, "users = 2")
	return summary, log
}

// RunOnFakeWith is RunOnFake with [run] lines of its own besides the
// phases (users = 2 in RunOnFake); it also returns the results directory.
func RunOnFakeWith(t *testing.T, f workload.Factory, options, run string) (summary []byte, results, log string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, f.Kind+".toml")
	text := fmt.Sprintf(`[lab]
name = %q
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "fake"
[node.p]
site = "a"
role = "primary"
[node.s]
site = "b"
role = "standby"
from = "p"
[workload]
kind = %q
%s
[run]
warmup = "200ms"
duration = "1s"
cooldown = "0s"
%s
`, f.Kind, f.Kind, options, run)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	results = filepath.Join(dir, "results")
	if _, _, err := runner.Run(ctx, s, runner.Options{Out: results, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &out, Offline: true,
		Engines: engine.NewRegistry(fake.Engine{}), Workloads: workload.NewRegistry(f)}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	b, err := os.ReadFile(filepath.Join(results, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b, results, out.String()
}

// OptionErrors builds f's workload from each testdata/options/*.toml and
// compares the error with the .golden file beside it (update rewrites
// them). A file is [workload] option lines (placed in Spec: the first is
// line 15) or, when it has [lab], a whole spec; a first line
// "# dialect: mysql" picks the dialect (default postgres). Every file
// must give an error.
func OptionErrors(t *testing.T, f workload.Factory, update bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "options", "*.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/options/*.toml: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(strings.TrimSuffix(name, ".toml"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			dialect := engine.Postgres
			if first, _, _ := strings.Cut(text, "\n"); strings.HasPrefix(first, "# dialect:") {
				dialect = engine.Dialect(strings.TrimSpace(strings.TrimPrefix(first, "# dialect:")))
			}
			if !strings.Contains(text, "[lab]") {
				text = Spec(f.Kind, 1, strings.TrimSpace(text))
			}
			s, err := spec.Parse(name, []byte(text))
			if err != nil {
				t.Fatalf("spec: %v", err)
			}
			_, err = workload.NewRegistry(f).For(s, dialect)
			if err == nil {
				t.Fatalf("%s built without error", name)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".toml") + ".golden"
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("error differs from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

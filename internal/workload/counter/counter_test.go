package counter

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestDocsShowThisFile keeps docs/extending.md's example and this package
// the same code.
func TestDocsShowThisFile(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/extending.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("counter.go")
	if err != nil {
		t.Fatal(err)
	}
	d := string(doc)
	a := strings.Index(d, "```go\npackage counter")
	if a < 0 {
		t.Fatal("docs/extending.md has no ```go block starting with package counter")
	}
	block := d[a+len("```go\n"):]
	block = block[:strings.Index(block, "```")]
	code := string(src)
	code = code[strings.Index(code, "package counter"):]
	if block != code {
		t.Errorf("docs/extending.md's example differs from counter.go:\n--- docs\n%s\n--- counter.go\n%s", block, code)
	}
}

// TestRunsOnTheFakeEngine runs the example through replab run's code, in
// this process: the engine is the fake (no root needed).
func TestRunsOnTheFakeEngine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "counter.toml")
	if err := os.WriteFile(path, []byte(`[lab]
name = "counter"
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
kind = "counter"
counters = 10
[run]
users = 2
warmup = "200ms"
duration = "1s"
cooldown = "0s"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log bytes.Buffer
	out := filepath.Join(dir, "results")
	if _, _, err := runner.Run(ctx, s, runner.Options{Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &log, Offline: true,
		Engines: engine.NewRegistry(fake.Engine{}), Workloads: workload.NewRegistry(Factory)}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Complete     bool
		Transactions int64
		RowsChanged  int64 `json:"rows_changed"`
		Errors       int64
		Load         struct{ Rows int64 }
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Complete || sum.Transactions == 0 || sum.RowsChanged != sum.Transactions || sum.Errors != 0 || sum.Load.Rows != 10 {
		t.Errorf("summary %+v\n%s", sum, log.String())
	}
}

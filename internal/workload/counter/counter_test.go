package counter

import (
	"encoding/json"
	"os"
	"replab/internal/workload/workloadtest"
	"strings"
	"testing"
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
	b, log := workloadtest.RunOnFake(t, Factory, "counters = 10")
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
		t.Errorf("summary %+v\n%s", sum, log)
	}
}

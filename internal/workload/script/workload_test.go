package script

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"replab/internal/engine"
	"replab/internal/workload"
	"replab/internal/workload/workloadtest"
)

const fakeOptions = `schema = "testdata/fake/schema.sql"
load = "testdata/fake/load.sql"
transactions = ["testdata/fake/bump.sql@70", "testdata/fake/look.sql@30"]
reads_at = "replica"`

// TestOptions: the files are read relative to the spec, their errors
// point at the option's line and the script's file:line:column.
func TestOptions(t *testing.T) {
	w, err := workloadtest.Build(t, Factory, 1, fakeOptions, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	s := w.Schema()
	if len(s.Tables) != 1 || s.Tables[0].Name != "kv" || len(s.Tables[0].Indexes[engine.Postgres]) != 1 {
		t.Errorf("schema %+v", s)
	}
	if w.TotalRows() != 2 {
		t.Errorf("total rows %d, want 2 (one per statement)", w.TotalRows())
	}
	types := w.Transactions()
	if len(types) != 2 || types[0].Name != "bump" || types[0].Weight != 70 || types[0].ReadOnly || types[0].Batch == nil ||
		types[1].Name != "look" || !types[1].ReadOnly || types[1].At != workload.AtReplica || types[1].Batch != nil {
		t.Errorf("types %+v", types)
	}
	for _, c := range []struct{ options, want string }{
		{`transactions = ["a.sql"]`, `unit.toml:13: workload.schema: a script workload needs schema`},
		{"schema = \"testdata/fake/schema.sql\"\ntransactions = [\"nope.sql@3\"]", "unit.toml:16: workload.transactions: open nope.sql: no such file or directory"},
		{"schema = \"testdata/fake/schema.sql\"\ntransactions = [\"testdata/parse/err-shell.sql\"]", `unit.toml:16: workload.transactions: testdata/parse/err-shell.sql:2:1: \shell is not supported by replab`},
		{"schema = \"testdata/fake/schema.sql\"\ntransactions = [\"testdata/fake/bump.sql@x\"]", `after @ want a weight (a whole number) or ro/rw, not "x"`},
		{"schema = \"testdata/fake/schema.sql\"\ntransactions = [\"testdata/fake/bump.sql@0\"]", "every weight is 0"},
		{"schema = \"testdata/fake/bump.sql\"\ntransactions = [\"testdata/fake/bump.sql\"]", "workload.schema: testdata/fake/bump.sql:1:1: backslash commands are not allowed in this file"},
		{"schema = \"testdata/fake/schema.sql\"\ntransactions = \"testdata/fake/bump.sql\"\nscale = 0", "workload.scale: want a whole number from 1 to 1000000"},
	} {
		_, err := workloadtest.Build(t, Factory, 1, c.options, "postgres")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\nerror %v\nwant %q", c.options, err, c.want)
		}
	}
	if w, err := workloadtest.Build(t, Factory, 1, "schema = \"testdata/fake/schema.sql\"\ntransactions = [\"testdata/fake/look.sql@rw@5\"]", "postgres"); err != nil || w.Transactions()[0].ReadOnly || w.Transactions()[0].Weight != 5 {
		t.Errorf("@rw@5: %v", err)
	}
}

// TestRunsOnTheFakeEngine runs scripts through replab run's code in this
// process: the load's COPY block, \gset and \if at a replica, and a
// division by zero now and then counted as an error of its type.
func TestRunsOnTheFakeEngine(t *testing.T) {
	wd, _ := os.Getwd()
	b, log := workloadtest.RunOnFake(t, Factory, strings.ReplaceAll(fakeOptions, `"testdata/`, `"`+filepath.Join(wd, "testdata")+"/"))
	var sum struct {
		Complete     bool
		Transactions int64
		Errors       int64
		Load         struct{ Rows int64 }
		Types        map[string]struct {
			Count  int64
			Errors map[string]int64
		} `json:"types"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	bump, look := sum.Types["bump"], sum.Types["look"]
	if !sum.Complete || sum.Load.Rows != 2 || bump.Count == 0 || look.Count == 0 || len(look.Errors) != 0 {
		t.Errorf("summary %s\n%s", b, log)
	}
	// 1000 / :z with z in 0…30: about one bump in 31 divides by zero.
	if n := bump.Errors["other"]; n == 0 || n > bump.Count/5 {
		t.Errorf("bump: %d errors of %d: %s", n, bump.Count, b)
	}
}

// loaderRec records what Load sends.
type loaderRec struct{ sql []string }

func (l *loaderRec) Copy(context.Context, string, []string, workload.RowSource) (int64, error) {
	return 0, nil
}
func (l *loaderRec) Exec(_ context.Context, q string) error { l.sql = append(l.sql, q); return nil }
func (l *loaderRec) Close() error                           { return nil }

// TestLoadCopyBlocks: COPY … FROM STDIN rows (text format: tabs, \N,
// backslash escapes) go in as INSERTs of quoted literals, which the
// server converts to the columns' types.
func TestLoadCopyBlocks(t *testing.T) {
	text := "CREATE TEMP TABLE x (a int);\nCOPY t (a, b, c) FROM STDIN;\n1\tit's\t\\N\n2\ta\\tb\\\\c\tz\n\\.\nANALYZE t;\n"
	steps, err := parseLoad("l.sql", text, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{dialect: "postgres", load: steps}
	l := &loaderRec{}
	var last int64
	if err := w.Load(context.Background(), l, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	want := []string{"CREATE TEMP TABLE x (a int)", `INSERT INTO t (a, b, c) VALUES ('1', 'it''s', NULL), ('2', 'a	b\c', 'z')`, "ANALYZE t"}
	if !reflect.DeepEqual(l.sql, want) || last != 4 {
		t.Errorf("sent %q (progress %d)\nwant %q", l.sql, last, want)
	}
	if _, err := parseLoad("l.sql", "COPY t FROM STDIN;\n1\n", "postgres"); err == nil || err.Error() != `l.sql:1:1: COPY data without an end line \.` {
		t.Errorf("unterminated COPY: %v", err)
	}
	if _, err := parseLoad("l.sql", "COPY t FROM STDIN WITH (FORMAT csv);\n1\n\\.\n", "postgres"); err == nil || !strings.Contains(err.Error(), "only the default text format") {
		t.Errorf("csv COPY: %v", err)
	}
}

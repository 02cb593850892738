package personnel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"replab/internal/engine"
	"replab/internal/workload"
	"replab/internal/workload/gendata"
	"replab/internal/workload/workloadtest"
)

func build(t *testing.T, seed int, options string, dialect engine.Dialect) (*Workload, error) {
	t.Helper()
	w, err := workloadtest.Build(t, Factory, seed, options, dialect)
	if err != nil {
		return nil, err
	}
	return w.(*Workload), nil
}

func mustBuild(t *testing.T, seed int, options string, dialect engine.Dialect) *Workload {
	t.Helper()
	w, err := build(t, seed, options, dialect)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// memLoader keeps what a Load sends.
type memLoader struct {
	rows   map[string][][]any
	cols   map[string][]string
	copies int
	execs  []string
}

func (m *memLoader) Copy(_ context.Context, table string, columns []string, src workload.RowSource) (int64, error) {
	if m.rows == nil {
		m.rows, m.cols = map[string][][]any{}, map[string][]string{}
	}
	m.copies++
	m.cols[table] = columns
	var n int64
	for src.Next() {
		v, err := src.Values()
		if err != nil {
			return n, err
		}
		if len(v) != len(columns) {
			return n, fmt.Errorf("%s: %d values for %d columns", table, len(v), len(columns))
		}
		m.rows[table] = append(m.rows[table], v)
		n++
	}
	return n, src.Err()
}

func (m *memLoader) Close() error { return nil }

func (m *memLoader) Exec(_ context.Context, sql string) error {
	m.execs = append(m.execs, sql)
	return nil
}

func load(t *testing.T, w *Workload) (*memLoader, []int64) {
	t.Helper()
	var m memLoader
	var reports []int64
	if err := w.Load(context.Background(), &m, func(n int64) { reports = append(reports, n) }); err != nil {
		t.Fatal(err)
	}
	return &m, reports
}

func TestLoadedRowsMatchTotalRows(t *testing.T) {
	w := mustBuild(t, 1, "persons = 300", "postgres")
	m, reports := load(t, w)
	var total int64
	want := w.TableRows()
	if len(m.rows) != 14 || len(want) != 14 {
		t.Fatalf("loaded %d tables, TableRows has %d; want 14", len(m.rows), len(want))
	}
	for name, rows := range m.rows {
		if int64(len(rows)) != want[name] {
			t.Errorf("%s: loaded %d rows, TableRows says %d", name, len(rows), want[name])
		}
		total += int64(len(rows))
	}
	if total != w.TotalRows() {
		t.Errorf("loaded %d rows, TotalRows says %d", total, w.TotalRows())
	}
	if got := len(m.rows["per"]); got != 300 {
		t.Errorf("per has %d rows, want 300", got)
	}
	if len(reports) == 0 || reports[len(reports)-1] != total {
		t.Errorf("last progress report %v, want %d", reports, total)
	}
	for i := 1; i < len(reports); i++ {
		if d := reports[i] - reports[i-1]; d <= 0 || d > gendata.ProgressEvery {
			t.Errorf("progress went from %d to %d", reports[i-1], reports[i])
		}
	}
	if len(m.execs) != 1 || !strings.HasPrefix(m.execs[0], "ANALYZE per") && !strings.HasPrefix(m.execs[0], "ANALYZE org") {
		t.Errorf("after load ran %q, want one ANALYZE", m.execs)
	}
}

func TestDataIsDeterministicFromTheSeed(t *testing.T) {
	a, _ := load(t, mustBuild(t, 42, "persons = 200", "postgres"))
	b, _ := load(t, mustBuild(t, 42, "persons = 200", "postgres"))
	c, _ := load(t, mustBuild(t, 43, "persons = 200", "postgres"))
	if !reflect.DeepEqual(a.rows, b.rows) {
		t.Error("same seed, different rows")
	}
	for _, table := range []string{"per", "per_skl", "org"} {
		if reflect.DeepEqual(a.rows[table], c.rows[table]) {
			t.Errorf("%s: seeds 42 and 43 gave the same rows", table)
		}
	}
	// The same person is the same in a larger load: rows depend on
	// (seed, table, id) only.
	d, _ := load(t, mustBuild(t, 42, "persons = 400", "postgres"))
	if !reflect.DeepEqual(a.rows["per"], d.rows["per"][:200]) {
		t.Error("persons 1..200 differ between a load of 200 and one of 400")
	}
}

func TestRowsAreConsistent(t *testing.T) {
	w := mustBuild(t, 3, "persons = 500\ntext_bytes = 700", "postgres")
	m, _ := load(t, w)
	deps := map[int64]int64{}
	for _, r := range m.rows["per"] {
		text := r[10].(string)
		if len(text) != 700 || !regexp.MustCompile(`^[A-Za-z0-9 .]+$`).MatchString(text) {
			t.Fatalf("per %d: description of %d characters %.40q…, want 700 ASCII", r[0], len(text), text)
		}
		if r[7].(int64)+r[8].(int64) != r[9].(int64) {
			t.Errorf("per %d: %d adult + %d minor dependants != %d total", r[0], r[7], r[8], r[9])
		}
		deps[r[0].(int64)] = r[9].(int64)
	}
	got := map[int64]int64{}
	for _, r := range m.rows["per_dpndnt"] {
		got[r[0].(int64)]++
	}
	for id, n := range deps {
		if got[id] != n {
			t.Errorf("per %d: %d dependants in per, %d rows in per_dpndnt", id, n, got[id])
		}
	}
	for _, tbl := range tables {
		seen := map[string]bool{}
		for _, r := range m.rows[tbl.name] {
			var key []string
			for i, c := range tbl.cols {
				if contains(tbl.pk, c.name) {
					key = append(key, fmt.Sprint(r[i]))
				}
				if r[i] == nil && !c.null {
					t.Fatalf("%s: NULL in %s", tbl.name, c.name)
				}
			}
			k := strings.Join(key, "/")
			if seen[k] {
				t.Fatalf("%s: duplicate primary key %s", tbl.name, k)
			}
			seen[k] = true
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var keywords = strings.NewReplacer("CREATE TABLE", "", "NOT NULL", "", "PRIMARY KEY", "")

func TestSchemaHasFourteenTablesWithPrimaryKeys(t *testing.T) {
	s := mustBuild(t, 1, "", "mysql").Schema()
	if len(s.Tables) != 14 {
		t.Fatalf("%d tables, want 14", len(s.Tables))
	}
	for _, tbl := range s.Tables {
		for _, d := range []engine.Dialect{engine.Postgres, engine.MySQL} {
			ddl := tbl.Create[d]
			if !strings.HasPrefix(ddl, "CREATE TABLE "+tbl.Name+" (") || !strings.Contains(ddl, "PRIMARY KEY (") {
				t.Errorf("%s %s: %q", tbl.Name, d, ddl)
			}
			if rest := keywords.Replace(ddl); rest != strings.ToLower(rest) {
				t.Errorf("%s: identifiers not lower case: %q", tbl.Name, rest)
			}
		}
	}
	if per := s.Tables[4]; per.Name != "per" || !strings.Contains(per.Create[engine.Postgres], "per_dscrptn_text varchar(4000) NOT NULL") {
		t.Errorf("per: %q", per.Create[engine.Postgres])
	}
}

func TestStatementsUseTheDialectsPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		dialect        engine.Dialect
		update, lookup string
	}{
		{"postgres", "UPDATE per SET per_dscrptn_text = $1 WHERE per_id = $2", "per_id = $1"},
		{"mysql", "UPDATE per SET per_dscrptn_text = ? WHERE per_id = ?", "per_id = ?"},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			types := mustBuild(t, 1, "read_pct = 30", tc.dialect).Transactions()
			if len(types) != 2 || types[0].Name != "update" || types[0].Weight != 70 || types[1].Name != "lookup" || types[1].Weight != 30 {
				t.Fatalf("types %+v", types)
			}
			if types[0].Statements[0].SQL != tc.update {
				t.Errorf("update: %q, want %q", types[0].Statements[0].SQL, tc.update)
			}
			if !strings.HasSuffix(types[1].Statements[0].SQL, tc.lookup) {
				t.Errorf("lookup: %q, want …%q", types[1].Statements[0].SQL, tc.lookup)
			}
		})
	}
	t.Run("the study's transaction alone by default", func(t *testing.T) {
		types := mustBuild(t, 1, "", "postgres").Transactions()
		if len(types) != 1 || types[0].Name != "update" || types[0].Weight != 100 {
			t.Errorf("types %+v", types)
		}
	})
	t.Run("read only", func(t *testing.T) {
		types := mustBuild(t, 1, "read_pct = 100", "postgres").Transactions()
		if len(types) != 1 || types[0].Name != "lookup" {
			t.Errorf("types %+v", types)
		}
	})
}

func TestOptionErrorsPointAtTheSpec(t *testing.T) {
	for _, tc := range []struct {
		name, options, want string
	}{
		{"no persons", "persons = 0", `unit.toml:15:.*persons.*1 to 5000000`},
		{"too many persons", "persons = 5000001", `unit.toml:15:.*persons`},
		{"persons not a number", `persons = "many"`, `unit.toml:15:.*persons`},
		{"text too short", "text_bytes = 99", `unit.toml:15:.*text_bytes.*100 to 4000`},
		{"read_pct over 100", "read_pct = 101", `unit.toml:15:.*read_pct`},
		{"unknown option", "users = 3", `unit.toml:15:.*users.*unknown option for workload personnel; options: persons, read_pct, reads_at, text_bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, 1, tc.options, "postgres")
			if err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("error %v, want match %q", err, tc.want)
			}
		})
	}
	t.Run("unknown dialect", func(t *testing.T) {
		if _, err := build(t, 1, "", "oracle"); err == nil || !strings.Contains(err.Error(), "no oracle schema") {
			t.Errorf("error %v", err)
		}
	})
}

func TestTextIsASCIIOfTheLengthAsked(t *testing.T) {
	w := mustBuild(t, 1, "text_bytes = 100", "postgres")
	g := newGen(w)
	for _, n := range []int{100, 101, 399, 4000} {
		s := Text(g.At(1, int64(n)), n)
		if len(s) != n || strings.ContainsFunc(s, func(r rune) bool { return r > 127 || r < ' ' }) {
			t.Errorf("Text(%d) = %d characters %.20q…", n, len(s), s)
		}
	}
}

// TestTextCharactersAreUniform counts each character at each position of
// a number's group of ten over 64,000 texts: every one of the 64
// characters, and nothing else, about 1,000 times at each position (a
// wrong table or shift shows as a skew, a missing character or
// neighbours equal more often than one time in 64). The seed
// is fixed, so the counts are too; the bound is 6.4 standard deviations.
func TestTextCharactersAreUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var count [textGroup][256]int
	var same [textGroup - 1]int // s[i] == s[i+1]
	const texts = 64000
	for range texts {
		s := Text(r, textGroup)
		for i := range textGroup {
			count[i][s[i]]++
			if i > 0 && s[i] == s[i-1] {
				same[i-1]++
			}
		}
	}
	want := texts / 64
	for i := range textGroup {
		for c, n := range count[i] {
			inSet := strings.IndexByte(textChars, byte(c)) >= 0
			if !inSet && n > 0 || inSet && (n < want-200 || n > want+200) {
				t.Errorf("position %d: %q %d times, want %d ± 200 for each of %q and 0 for others", i, byte(c), n, want, textChars)
			}
		}
		// Independent neighbours are equal one time in 64.
		if i < textGroup-1 && (same[i] < want-200 || same[i] > want+200) {
			t.Errorf("positions %d and %d: equal %d times, want %d ± 200", i, i+1, same[i], want)
		}
	}
}

// TestTextDiffersEachTime: texts drawn one after another from one
// generator differ (each update writes a fresh description), and the
// same generator state makes the same text.
func TestTextDiffersEachTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 1000 {
		s := Text(r, 400)
		if seen[s] {
			t.Fatalf("text %.20q… made twice", s)
		}
		seen[s] = true
	}
	if a, b := Text(rand.New(rand.NewPCG(3, 4)), 400), Text(rand.New(rand.NewPCG(3, 4)), 400); a != b {
		t.Errorf("the same seed made %.20q… and %.20q…", a, b)
	}
}

// TestUpdateBatchInScratch: a batch built in the user's scratch is the
// batch built without one (the same draws, the same id and text), each
// one overwrites the last, and once the scratch has grown building one
// allocates nothing.
func TestUpdateBatchInScratch(t *testing.T) {
	w := mustBuild(t, 1, "text_bytes = 400", "postgres")
	r1, r2 := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(5, 6))
	s := &workload.Scratch{}
	var prev string
	for i := range 50 {
		plain := w.updateBatch(0, r1, nil)
		calls := w.updateBatch(0, r2, s)
		if len(calls) != 1 || len(calls[0].Args) != 2 || calls[0].Stmt != "update" || calls[0].Rows != 1 {
			t.Fatalf("batch %d: %+v", i, calls)
		}
		text, id := *calls[0].Args[0].(*[]byte), *calls[0].Args[1].(*int64)
		pText, pID := *plain[0].Args[0].(*[]byte), *plain[0].Args[1].(*int64)
		if string(text) != string(pText) || id != pID || len(text) != 400 {
			t.Fatalf("batch %d in the scratch: id %d, text %.20q… (%d bytes); without: id %d, text %.20q…", i, id, text, len(text), pID, pText)
		}
		if string(text) == prev {
			t.Fatalf("batch %d: the same text as the last", i)
		}
		prev = string(text)
	}
	if n := testing.AllocsPerRun(100, func() { w.updateBatch(0, r2, s) }); n != 0 {
		t.Errorf("a batch in a scratch allocates %.0f times, want 0", n)
	}
}

// TestAppendTextIsText: AppendText appends what Text returns, drawing the
// same from r.
func TestAppendTextIsText(t *testing.T) {
	r1, r2 := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
	b := []byte("prefix:")
	for _, n := range []int{0, 1, 9, 10, 11, 400} {
		want := "prefix:" + Text(r1, n)
		if b = AppendText(b[:7], r2, n); string(b) != want {
			t.Errorf("AppendText(%d) = %.30q, want %.30q", n, b, want)
		}
	}
}

func BenchmarkText(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var s string
	for b.Loop() {
		s = Text(r, DefaultTextBytes)
	}
	_ = s
}

package kvinsert

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"replab/internal/engine"
	"replab/internal/workload"
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
	rows   [][]any
	copies int
	execs  []string
}

func (m *memLoader) Copy(_ context.Context, table string, columns []string, src workload.RowSource) (int64, error) {
	if table != "kv" || !reflect.DeepEqual(columns, []string{"k", "v"}) {
		return 0, fmt.Errorf("copy into %s %v", table, columns)
	}
	m.copies++
	var n int64
	for src.Next() {
		v, err := src.Values()
		if err != nil {
			return n, err
		}
		m.rows = append(m.rows, v)
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

func TestPreload(t *testing.T) {
	w := mustBuild(t, 5, "preload = 120000\nkey_bytes = 8\nvalue_bytes = 33", "postgres")
	m, reports := load(t, w)
	if int64(len(m.rows)) != w.TotalRows() || w.TotalRows() != 120000 {
		t.Fatalf("loaded %d rows, TotalRows %d, want 120000", len(m.rows), w.TotalRows())
	}
	if m.copies != 3 {
		t.Errorf("%d copies, want 3 chunks of at most %d", m.copies, chunkRows)
	}
	seen := map[string]bool{}
	for _, r := range m.rows {
		k, v := r[0].([]byte), r[1].([]byte)
		if len(k) != 8 || len(v) != 33 {
			t.Fatalf("key %d bytes, value %d bytes; want 8 and 33", len(k), len(v))
		}
		if seen[string(k)] {
			t.Fatalf("duplicate key %x", k)
		}
		seen[string(k)] = true
	}
	if len(reports) == 0 || reports[len(reports)-1] != 120000 {
		t.Errorf("last progress report of %v, want 120000", reports)
	}
	for i := 1; i < len(reports); i++ {
		if d := reports[i] - reports[i-1]; d <= 0 || d > progressEvery {
			t.Errorf("progress went from %d to %d", reports[i-1], reports[i])
		}
	}
	if !reflect.DeepEqual(m.execs, []string{"ANALYZE kv"}) {
		t.Errorf("after load ran %q", m.execs)
	}
}

func TestNoPreloadLoadsNothing(t *testing.T) {
	w := mustBuild(t, 5, "", "postgres")
	m, reports := load(t, w)
	if w.TotalRows() != 0 || len(m.rows) != 0 || m.copies != 0 || len(reports) != 0 {
		t.Errorf("total %d, %d rows in %d copies, reports %v", w.TotalRows(), len(m.rows), m.copies, reports)
	}
}

func TestPreloadIsDeterministicFromTheSeed(t *testing.T) {
	a, _ := load(t, mustBuild(t, 9, "preload = 1000", "postgres"))
	b, _ := load(t, mustBuild(t, 9, "preload = 1000", "postgres"))
	c, _ := load(t, mustBuild(t, 10, "preload = 1000", "postgres"))
	if !reflect.DeepEqual(a.rows, b.rows) {
		t.Error("same seed, different rows")
	}
	if reflect.DeepEqual(a.rows, c.rows) {
		t.Error("seeds 9 and 10 gave the same rows")
	}
	if k := a.rows[0][0].([]byte); len(k) != DefaultKeyBytes || len(a.rows[0][1].([]byte)) != DefaultValueBytes {
		t.Errorf("default sizes: key %d, value %d bytes", len(k), len(a.rows[0][1].([]byte)))
	}
}

// Users whose streams are seeded alike (the worst a driver could do), and
// two runs of the same spec against one table, still make distinct keys.
func TestInsertedKeysNeverCollide(t *testing.T) {
	const users, each = 8, 5000
	seen := map[string]bool{}
	var mu sync.Mutex
	for run := 0; run < 2; run++ {
		w := mustBuild(t, 1, "key_bytes = 8", "postgres")
		preload, _ := load(t, mustBuild(t, 1, "preload = 2000\nkey_bytes = 8", "postgres"))
		for _, r := range preload.rows {
			seen[string(r[0].([]byte))] = true
		}
		var wg sync.WaitGroup
		for u := 0; u < users; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(1, 2))
				for i := 0; i < each; i++ {
					k := w.key(r)
					mu.Lock()
					if seen[string(k)] {
						t.Errorf("run %d: key %x made twice", run, k)
					}
					seen[string(k)] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if len(seen) != 2*users*each+2000 {
		t.Errorf("%d distinct keys, want %d", len(seen), 2*users*each+2000)
	}
}

func TestKeyTakesItsLeadingBytesFromTheUsersStream(t *testing.T) {
	w := mustBuild(t, 1, "", "postgres")
	a := w.key(rand.New(rand.NewPCG(3, 4)))
	b := w.key(rand.New(rand.NewPCG(3, 4)))
	if len(a) != 10 || !bytes.Equal(a[:2], b[:2]) || bytes.Equal(a[2:], b[2:]) {
		t.Errorf("keys %x and %x: want the same 2 leading bytes and different last 8", a, b)
	}
}

func TestSchemaAndStatementsPerDialect(t *testing.T) {
	for _, tc := range []struct {
		dialect        engine.Dialect
		create, insert string
	}{
		{"postgres", "CREATE TABLE kv (k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (k))", "INSERT INTO kv (k, v) VALUES ($1, $2)"},
		{"mysql", "CREATE TABLE kv (k varbinary(12) NOT NULL, v varbinary(300) NOT NULL, PRIMARY KEY (k))", "INSERT INTO kv (k, v) VALUES (?, ?)"},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			w := mustBuild(t, 1, "key_bytes = 12\nvalue_bytes = 300", tc.dialect)
			s := w.Schema()
			if len(s.Tables) != 1 || s.Tables[0].Name != "kv" || s.Tables[0].Create[tc.dialect] != tc.create {
				t.Errorf("schema %+v, want %q", s.Tables, tc.create)
			}
			types := w.Transactions()
			if len(types) != 1 || types[0].Name != "insert" || types[0].Weight != 100 || types[0].Statements[0].SQL != tc.insert {
				t.Errorf("transactions %+v, want insert: %q", types, tc.insert)
			}
		})
	}
}

func TestOptionErrorsPointAtTheSpec(t *testing.T) {
	for _, tc := range []struct {
		name, options, want string
	}{
		{"negative preload", "preload = -1", `unit.toml:15:.*preload.*0 to 100000000`},
		{"short key", "key_bytes = 4", `unit.toml:15:.*key_bytes.*8 to 255`},
		{"no value", "value_bytes = 0", `unit.toml:15:.*value_bytes.*1 to 60000`},
		{"unknown option", "persons = 3", `unit.toml:15:.*persons.*unknown option for workload kv-insert; options: key_bytes, preload, value_bytes`},
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

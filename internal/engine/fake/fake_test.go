package fake

import (
	"context"
	"fmt"
	"os"

	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/enginetest"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

const twoNodes = `
[lab]
name = "fk"
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
[scheme]
delay = "30ms"
conflict_every = 3
`

// up brings a fake cluster up in an offline lab (no root needed).
func up(t *testing.T, text string) engine.Cluster {
	t.Helper()
	s, err := spec.Parse("fk.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := lab.Up(ctx, s, lab.Options{Offline: true, StateRoot: t.TempDir(), DataRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := Engine{}.Up(ctx, l, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestAChangeReachesTheStandbyAfterTheDelay(t *testing.T) {
	c := up(t, twoNodes)
	ctx := context.Background()
	sc := c.(engine.SQL)
	if err := sc.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "kv", Create: map[engine.Dialect]string{
		"postgres": "CREATE TABLE kv (k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (k))"}}}}); err != nil {
		t.Fatal(err)
	}
	p, _ := sc.Open(ctx, "p", "a")
	s, _ := sc.Open(ctx, "s", "b")
	defer p.Close()
	defer s.Close()
	count := func() int {
		var n int
		if err := s.QueryRow("SELECT count(*) FROM kv").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := time.Now()
	if _, err := p.Exec("INSERT INTO kv (k, v) VALUES ($1, $2)", []byte("a"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 && time.Since(start) < 30*time.Millisecond {
		t.Errorf("the standby had the row after %s, before the 30 ms delay", time.Since(start))
	}
	for count() == 0 {
		time.Sleep(time.Millisecond)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("the row arrived after %s, before the 30 ms delay", el)
	}
	var v []byte
	if err := s.QueryRow("SELECT v FROM kv WHERE k = $1", []byte("a")).Scan(&v); err != nil || string(v) != "x" {
		t.Errorf("standby row: %q, %v", v, err)
	}
	if _, err := p.Exec("INSERT INTO kv (k, v) VALUES ($1, $2)", []byte("a"), []byte("y")); err == nil {
		t.Error("a duplicate key was accepted")
	}
}

func TestEveryThirdCommitConflicts(t *testing.T) {
	c := up(t, twoNodes)
	ctx := context.Background()
	sc := c.(engine.SQL)
	_ = sc.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{enginekit.LagTable()}})
	p, _ := sc.Open(ctx, "p", "a")
	defer p.Close()
	commits := c.(*cluster).commits.Load()
	var conflicts int
	for i := range 9 {
		_, err := p.Exec("INSERT INTO replab_lag (writer, seq) VALUES ($1, 0)", i)
		if err != nil {
			if cl := engine.Classify(c, err); !cl.Retry || !cl.Conflict || cl.Code != "40001" {
				t.Errorf("commit %d: %v classified %+v", i, err, cl)
			}
			conflicts++
		}
	}
	if want := int((commits+9)/3 - commits/3); conflicts != want {
		t.Errorf("%d conflicts in 9 commits, want %d", conflicts, want)
	}
}

func TestANodeThatIsDownRefusesAndCatchesUpWhenStarted(t *testing.T) {
	c := up(t, strings.Replace(twoNodes, "conflict_every = 3", "", 1))
	ctx := context.Background()
	sc, nc := c.(engine.SQL), c.(engine.NodeControl)
	_ = sc.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{enginekit.LagTable()}})
	if err := nc.Kill(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	s, _ := sc.Open(ctx, "s", "b")
	defer s.Close()
	var n int
	err := s.QueryRow("SELECT count(*) FROM replab_lag").Scan(&n)
	if cl := engine.Classify(c, err); cl.Code != "connection" {
		t.Errorf("a query at a killed node: %v (%+v), want a connection error", err, cl)
	}
	p, _ := sc.Open(ctx, "p", "a")
	defer p.Close()
	if _, err := p.Exec("INSERT INTO replab_lag (writer, seq) VALUES (1, 5)"); err != nil {
		t.Fatal(err)
	}
	if err := nc.Start(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.QueryRow("SELECT seq FROM replab_lag WHERE writer = 1").Scan(&n); err != nil || n != 5 {
		t.Errorf("after the restart the standby shows seq %d, %v; want 5", n, err)
	}
	if err := nc.Start(ctx, "s"); err == nil || !strings.Contains(err.Error(), "already up") {
		t.Errorf("starting a running node: %v", err)
	}
}

func TestProcessesAreTheAppliersThreads(t *testing.T) {
	c := up(t, twoNodes)
	procs, err := c.Processes(context.Background())
	if err != nil || len(procs) != 2 {
		t.Fatalf("%d processes, %v", len(procs), err)
	}
	tids := map[int]bool{}
	for _, p := range procs {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/stat", p.PID, p.TID)); err != nil || p.TID == 0 || p.Apply != (p.Node == "s") {
			t.Errorf("process %+v: want a thread of this process (%v), apply only at the standby", p, err)
		}
		tids[p.TID] = true
	}
	if len(tids) != 2 {
		t.Errorf("the appliers share a thread: %+v", procs)
	}
}

func TestStampsAreReadThroughSQL(t *testing.T) {
	c := up(t, twoNodes)
	ctx := context.Background()
	_ = c.(engine.SQL).ApplySchema(ctx, engine.Schema{Tables: []engine.Table{enginekit.LagTable()}})
	stamps, update, err := enginekit.StampsOf(c)
	if err != nil || update == "" {
		t.Fatalf("stamps: %v, update %q", err, update)
	}
	var resetErr error
	for range 3 { // conflict_every = 3 may refuse one
		if resetErr = stamps.ResetLag(ctx, 3); resetErr == nil {
			break
		}
	}
	if resetErr != nil {
		t.Fatal(resetErr)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := stamps.LagReader(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dst := []int64{-1, -1, -1}
	if err := r.Positions(ctx, dst); err != nil || dst[0] != 0 || dst[2] != 0 {
		t.Errorf("positions %v, %v: want every writer at 0", dst, err)
	}
}

func TestValidationErrors(t *testing.T) {
	enginetest.ValidationGolden(t, Engine{}, "testdata/errors")
}

func TestStatementsTheFakeUnderstands(t *testing.T) {
	c := up(t, strings.Replace(twoNodes, "conflict_every = 3", "", 1))
	ctx := context.Background()
	sc := c.(engine.SQL)
	if err := sc.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "t", Create: map[engine.Dialect]string{
		"postgres": "CREATE TABLE t (id bigint NOT NULL, name text, n bigint NOT NULL, CONSTRAINT pk PRIMARY KEY (id))"}}}}); err != nil {
		t.Fatal(err)
	}
	db, _ := sc.Open(ctx, "p", "a")
	defer db.Close()
	for _, q := range []string{
		"INSERT INTO t (id, name, n) VALUES (1, 'a', 10), (2, 'it''s', 20)",
		"INSERT INTO t (id, name, n) VALUES (1, 'x', 0) ON CONFLICT (id) DO UPDATE SET n = t_n_is_not_a_column",
	} {
		_, err := db.Exec(q)
		if strings.Contains(q, "t_n_is_not") != (err != nil) {
			t.Errorf("%s: %v", q, err)
		}
	}
	mustExec := func(q string, args ...any) int64 {
		t.Helper()
		res, err := db.Exec(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		n, _ := res.RowsAffected()
		return n
	}
	if n := mustExec("UPDATE t SET n = n + 5 WHERE id = $1", 1); n != 1 {
		t.Errorf("update changed %d rows", n)
	}
	if n := mustExec("INSERT INTO t (id, name, n) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name", 2, "b", 0); n != 1 {
		t.Errorf("upsert changed %d rows", n)
	}
	mustExec("DELETE FROM t WHERE id = 3")
	rows, err := db.Query("SELECT id, name, n FROM t")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id, n int64
		var name string
		if err := rows.Scan(&id, &name, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %d", id, name, n))
	}
	if strings.Join(got, "; ") != "1 a 15; 2 b 20" {
		t.Errorf("rows %q", got)
	}
	// Lists kept as text, appended with || (PostgreSQL) or CONCAT (MySQL);
	// session settings are taken and ignored.
	mustExec("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE")
	for i, q := range []string{
		"INSERT INTO t AS x (id, name, n) VALUES ($1, $2, 0) ON CONFLICT (id) DO UPDATE SET name = x.name || ',' || $2",
		"INSERT INTO t (id, name, n) VALUES (?, ?, 0) ON DUPLICATE KEY UPDATE name = CONCAT(name, ',', ?)",
	} {
		for _, v := range []string{"1", "22", "333"} {
			id := int64(10 + i)
			if n := mustExec(q, id, v, v); n != 1 {
				t.Errorf("%s: %d rows", q, n)
			}
		}
	}
	for _, id := range []int64{10, 11} {
		var list string
		if err := db.QueryRow("SELECT name FROM t WHERE id = $1", id).Scan(&list); err != nil || list != "1,22,333" {
			t.Errorf("list %d: %q, %v", id, list, err)
		}
	}
	if _, err := db.Exec("SELECT * FROM t JOIN u USING (id)"); err == nil || engine.Classify(c, err).Code != "42601" {
		t.Errorf("a join: %v, want SQLSTATE 42601", err)
	}
}

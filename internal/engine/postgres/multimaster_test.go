package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/labtest"
	"replab/internal/testkit"
)

// Three masters in three sites, each pair joined by a short link.
const mmSpec = `
[lab]
name = "NAME"
[site.eu]
[site.us]
[site.asia]
[[link]]
sites = ["eu", "us"]
delay = "10ms"
rate = "1gbit"
[[link]]
sites = ["eu", "asia"]
delay = "20ms"
rate = "1gbit"
[[link]]
sites = ["us", "asia"]
delay = "15ms"
rate = "1gbit"
[engine]
kind = "postgres"
[node.eu1]
site = "eu"
role = "master"
[node.us1]
site = "us"
role = "master"
[node.asia1]
site = "asia"
role = "master"
[scheme]
replication = "multimaster"
conflict = "last_update_wins"
`

// mmEnv is a running multi-master lab with a client pool per master,
// each connecting from the master's own site.
type mmEnv struct {
	lab *lab.Lab
	c   *cluster
	db  map[string]*sql.DB
}

// mmUp builds the lab and its cluster, and removes both when the test
// ends (also when it fails), then checks that no namespace or server of
// it remains.
func mmUp(t *testing.T) *mmEnv {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Pglogical)
	start := time.Now()
	l, c := labtest.ClusterLog(t, Engine{}, "tmm", mmSpec, mmLog{t})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Logf("3 masters replicating %.1f s after start", time.Since(start).Seconds())

	e := &mmEnv{lab: l, c: c.(*cluster), db: map[string]*sql.DB{}}
	for _, n := range e.c.nodes {
		db, err := e.c.Open(ctx, n.Name, n.Site)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(4)
		t.Cleanup(func() { db.Close() })
		e.db[n.Name] = db
	}
	return e
}

// mmLog sends the engine's progress lines to the test log.
type mmLog struct{ t *testing.T }

func (w mmLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func mmCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (e *mmEnv) masters() []string { return e.c.plan.primaries }

func (e *mmEnv) exec(t *testing.T, node, q string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.db[node].ExecContext(ctx, q, args...); err != nil {
		t.Fatalf("%s: %s: %v", node, q, err)
	}
}

func (e *mmEnv) int(t *testing.T, node, q string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := e.db[node].QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %s: %v", node, q, err)
	}
	return n
}

// checksum is a table's row count and the md5 of its rows in key order.
func (e *mmEnv) checksum(t *testing.T, node, table string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	var sum string
	q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(t::text, ',' ORDER BY id)), '') FROM %s t`, table)
	if err := e.db[node].QueryRowContext(ctx, q).Scan(&n, &sum); err != nil {
		t.Fatalf("%s: checksum %s: %v", node, table, err)
	}
	return n, sum
}

// quiesce waits until everything committed so far at every master is
// applied at every other: WaitFlowing's markers travel behind it.
func (e *mmEnv) quiesce(t *testing.T) {
	t.Helper()
	if err := e.c.WaitFlowing(mmCtx(t, 45*time.Second)); err != nil {
		t.Fatalf("wait for replication to catch up: %v", err)
	}
}

// converged quiesces, then checks that every master has wantRows rows of
// table with the same checksum.
func (e *mmEnv) converged(t *testing.T, table string, wantRows int) {
	t.Helper()
	e.quiesce(t)
	var first string
	var report []string
	ok := true
	for _, m := range e.masters() {
		n, sum := e.checksum(t, m, table)
		report = append(report, fmt.Sprintf("%s: %d rows md5 %s", m, n, sum))
		if first == "" {
			first = sum
		}
		if n != wantRows || sum != first {
			ok = false
		}
	}
	if !ok {
		t.Fatalf("%s did not converge to %d identical rows: %s", table, wantRows, strings.Join(report, "; "))
	}
}

// value reads the v column of row id of table at a master.
func (e *mmEnv) value(t *testing.T, node, table string, id int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v string
	if err := e.db[node].QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM %s WHERE id = $1", table), id).Scan(&v); err != nil {
		t.Fatalf("%s: read %s row %d: %v", node, table, id, err)
	}
	return v
}

// mmEventually polls cond until it holds or d passes.
func mmEventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mmTable(name string) engine.Table {
	return engine.Table{Name: name, Create: map[engine.Dialect]string{
		"postgres": fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v text NOT NULL, origin text NOT NULL)", name),
	}}
}

func TestMultimaster(t *testing.T) {
	t.Parallel()
	e := mmUp(t)
	ctx := mmCtx(t, time.Minute)
	if err := e.c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{
		mmTable("mm_reach"), mmTable("mm_conflict"), mmTable("mm_keys"), mmTable("mm_part"),
	}}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}

	t.Run("a table without a primary key is refused", func(t *testing.T) {
		err := e.c.ApplySchema(mmCtx(t, 30*time.Second), engine.Schema{Tables: []engine.Table{{
			Name: "mm_nopk", Create: map[engine.Dialect]string{"postgres": "CREATE TABLE mm_nopk (v text)"},
		}}})
		if err == nil || !strings.Contains(err.Error(), "primary key") {
			t.Errorf("want an error about the missing primary key, got %v", err)
		}
	})

	t.Run("a row written at any master reaches every other", func(t *testing.T) {
		for i, src := range e.masters() {
			e.exec(t, src, "INSERT INTO mm_reach (id, v, origin) VALUES ($1, 'hello', $2)", i, src)
			committed := time.Now()
			for _, dst := range e.masters() {
				if dst == src {
					continue
				}
				mmEventually(t, 20*time.Second, fmt.Sprintf("row from %s at %s", src, dst), func() bool {
					return e.int(t, dst, "SELECT count(*) FROM mm_reach WHERE id = $1", i) == 1
				})
				t.Logf("%s -> %s: visible within %.1f ms of the commit", src, dst, float64(time.Since(committed).Microseconds())/1000)
			}
		}
		e.converged(t, "mm_reach", len(e.masters()))
	})

	t.Run("replication state names each subscriber and its provider", func(t *testing.T) {
		rs, err := e.c.ReplicationState(mmCtx(t, 20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]engine.ReplicaState{}
		for _, r := range rs {
			got[r.Node+"<-"+r.From] = r
		}
		for _, sub := range e.masters() {
			for _, prov := range e.masters() {
				if sub == prov {
					continue
				}
				r, ok := got[sub+"<-"+prov]
				if !ok || r.Kind != "pglogical" {
					t.Errorf("no pglogical row for %s from %s in %+v", sub, prov, rs)
				}
			}
		}
	})

	t.Run("concurrent updates of one row converge to the later commit", func(t *testing.T) {
		ms := e.masters()
		rounds := [][2]string{{ms[0], ms[1]}, {ms[1], ms[2]}, {ms[2], ms[0]}}
		for id := range rounds {
			e.exec(t, ms[0], "INSERT INTO mm_conflict (id, v, origin) VALUES ($1, 'start', $2)", id, ms[0])
		}
		e.quiesce(t)
		for id, r := range rounds {
			first, second := r[0], r[1]
			ts1, ts2 := e.overlappingUpdates(t, id, first, second)
			if !ts2.After(ts1) {
				t.Fatalf("row %d: %s committed at %s, not after %s's %s", id, second, ts2, first, ts1)
			}
			t.Logf("row %d: %s updated it at %s, %s at %s (%.3f ms later), neither having seen the other's change",
				id, first, ts1.Format("15:04:05.000000"), second, ts2.Format("15:04:05.000000"), float64(ts2.Sub(ts1).Microseconds())/1000)
		}
		e.converged(t, "mm_conflict", len(rounds))
		for id, r := range rounds {
			for _, m := range ms {
				if v := e.value(t, m, "mm_conflict", id); v != "by "+r[1] {
					t.Errorf("row %d at %s: %q, want the later commit's %q (last_update_wins)", id, m, v, "by "+r[1])
				}
			}
		}
	})

	t.Run("concurrent writes of different keys at two masters converge", func(t *testing.T) {
		ms := e.masters()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		start := time.Now()
		for i, m := range ms[:2] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				for k := range 200 {
					id := i*1000 + k
					if _, err := e.db[m].ExecContext(ctx, "INSERT INTO mm_keys (id, v, origin) VALUES ($1, md5($2), $3)", id, fmt.Sprint(id), m); err != nil {
						errs <- fmt.Errorf("%s: insert %d: %w", m, id, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		wrote := time.Since(start)
		e.converged(t, "mm_keys", 400)
		t.Logf("2 x 200 inserts in %.2f s; identical 400 rows everywhere %.2f s after the start", wrote.Seconds(), time.Since(start).Seconds())
	})

	t.Run("writes on both sides of a partition converge after it heals", func(t *testing.T) {
		ms := e.masters()
		a, b, c := ms[0], ms[1], ms[2]
		siteA, siteB := e.c.byName[a].Site, e.c.byName[b].Site
		e.exec(t, a, "INSERT INTO mm_part (id, v, origin) VALUES (0, 'start', $1)", a)
		e.quiesce(t)

		if err := e.lab.SetLink(siteA, siteB, true, []string{"down"}); err != nil {
			t.Fatal(err)
		}
		healed := false
		heal := func() {
			if !healed {
				healed = true
				if err := e.lab.SetLink(siteA, siteB, true, []string{"up"}); err != nil {
					t.Errorf("heal %s<->%s: %v", siteA, siteB, err)
				}
			}
		}
		defer heal()
		cut := time.Now()
		for k := 1; k <= 50; k++ {
			e.exec(t, a, "INSERT INTO mm_part (id, v, origin) VALUES ($1, 'a', $2)", k, a)
			e.exec(t, b, "INSERT INTO mm_part (id, v, origin) VALUES ($1, 'b', $2)", 100+k, b)
		}
		e.exec(t, a, "UPDATE mm_part SET v = $1, origin = $1 WHERE id = 0", "by "+a)
		e.exec(t, b, "UPDATE mm_part SET v = $1, origin = $1 WHERE id = 0", "by "+b)

		// The third master still hears both sides...
		mmEventually(t, 20*time.Second, c+" receives both sides of the partition", func() bool {
			return e.int(t, c, "SELECT count(*) FROM mm_part") == 101 &&
				e.int(t, c, "SELECT count(*) FROM mm_part WHERE id = 0 AND v = $1", "by "+b) == 1
		})
		// ...and, with forward_origins '{}', passes on neither.
		time.Sleep(time.Until(cut.Add(3 * time.Second)))
		if n := e.int(t, a, "SELECT count(*) FROM mm_part WHERE id > 100"); n != 0 {
			t.Errorf("%s has %d of %s's rows during the partition: changes were forwarded", a, n, b)
		}
		if n := e.int(t, b, "SELECT count(*) FROM mm_part WHERE id BETWEEN 1 AND 100"); n != 0 {
			t.Errorf("%s has %d of %s's rows during the partition: changes were forwarded", b, n, a)
		}

		heal()
		healedAt := time.Now()
		e.converged(t, "mm_part", 101)
		t.Logf("partition %s<->%s held %.1f s; identical 101 rows everywhere %.2f s after it healed",
			siteA, siteB, healedAt.Sub(cut).Seconds(), time.Since(healedAt).Seconds())
		for _, m := range ms {
			if v := e.value(t, m, "mm_part", 0); v != "by "+b {
				t.Errorf("row 0 at %s: %q, want the later commit's %q", m, v, "by "+b)
			}
		}
	})

	t.Run("checksums agree at every master once converged", func(t *testing.T) {
		e.quiesce(t)
		tables := []string{"mm_reach", "mm_conflict", "mm_keys", "mm_part"}
		sums, err := e.c.Checksums(mmCtx(t, 30*time.Second), tables...)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range e.masters() {
			if len(sums[m]) != len(tables) {
				t.Errorf("checksums at %s: %v, want %d tables", m, sums[m], len(tables))
			}
		}
		if d := engine.Diverged(sums); len(d) > 0 {
			t.Errorf("the copies differ: %+v", d)
		}
	})
}

// overlappingUpdates makes two masters update row id of mm_conflict in
// transactions that overlap: second reads the row (FOR UPDATE) before
// first commits, and commits after, so neither has seen the other's
// change however fast the link. It returns both commit timestamps.
func (e *mmEnv) overlappingUpdates(t *testing.T, id int, first, second string) (time.Time, time.Time) {
	t.Helper()
	ctx := mmCtx(t, 20*time.Second)
	tx2, err := e.db[second].BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback()
	var before string
	if err := tx2.QueryRowContext(ctx, "SELECT v FROM mm_conflict WHERE id = $1 FOR UPDATE", id).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before != "start" {
		t.Fatalf("row %d at %s is %q before the round", id, second, before)
	}
	update := func(tx *sql.Tx, by string) string {
		var xid string
		if err := tx.QueryRowContext(ctx, "UPDATE mm_conflict SET v = $1, origin = $2 WHERE id = $3 RETURNING pg_current_xact_id()::text",
			"by "+by, by, id).Scan(&xid); err != nil {
			t.Fatalf("%s: update row %d: %v", by, id, err)
		}
		return xid
	}
	tx1, err := e.db[first].BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	xid1 := update(tx1, first)
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	xid2 := update(tx2, second)
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	commitTS := func(node, xid string) time.Time {
		var ts time.Time
		if err := e.db[node].QueryRowContext(ctx, "SELECT pg_xact_commit_timestamp($1::xid8::xid)", xid).Scan(&ts); err != nil {
			t.Fatalf("%s: commit timestamp of %s: %v", node, xid, err)
		}
		return ts
	}
	return commitTS(first, xid1), commitTS(second, xid2)
}

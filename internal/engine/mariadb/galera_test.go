package mariadb

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

const galeraSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
delay = "10ms"
[[link]]
sites = ["b", "c"]
delay = "10ms"
[[link]]
sites = ["a", "c"]
delay = "10ms"
[engine]
kind = "mariadb"
[node.g1]
site = "a"
role = "master"
[node.g2]
site = "b"
role = "master"
[node.g3]
site = "c"
role = "master"
[scheme]
replication = "galera"
sync_wait = 1
gcache_size = "32M"
fc_limit = 64
# Notice a cut-off member within seconds (Galera's defaults wait 5 s / 15 s).
provider_options = "evs.keepalive_period=PT0.5S; evs.suspect_timeout=PT2S; evs.inactive_timeout=PT3S; evs.inactive_check_period=PT0.5S; evs.install_timeout=PT3S"
`

// TestGaleraMinorityRefusesAndRejoins: three Galera masters; g3 cut off
// from both others leaves the primary component and refuses writes with
// 1047 (classified, not retried) while the majority keeps writing; after
// the heal it catches up by IST and every copy agrees.
func TestGaleraMinorityRefusesAndRejoins(t *testing.T) {
	t.Parallel()
	l, c := testCluster(t, "mdbgal", galeraSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, d := range l.Emulator().Stats() {
		t.Logf("set-up on %s->%s: %.1f MB", d.From, d.To, float64(d.Counters.DeliveredBytes)/1e6)
	}
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "t",
		Create: map[engine.Dialect]string{"mysql": "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT)"}}}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"g1", "g2", "g3"} {
		execAt(t, ctx, c, m, "INSERT INTO t (v) VALUES (1)")
	}
	agree(t, ctx, c, "t")
	// The bulk path loads in write-sets of galeraLoadChunk rows.
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "u",
		Create: map[engine.Dialect]string{"mysql": "CREATE TABLE u (id BIGINT PRIMARY KEY, k VARBINARY(16), v VARCHAR(100), n BIGINT)"}}}}); err != nil {
		t.Fatal(err)
	}
	ld, err := c.Loader(ctx, "g2", "b")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ld.Copy(ctx, "u", []string{"id", "k", "v", "n"}, &testRows{n: 2*galeraLoadChunk + 1}); err != nil || n != 2*galeraLoadChunk+1 {
		t.Fatalf("loaded %d rows (%v), want %d", n, err, 2*galeraLoadChunk+1)
	}
	ld.Close()
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "u")

	// Two transactions updating one row at two nodes: the second to commit
	// loses certification and comes back as a deadlock, classified a
	// retryable conflict. The row is looked up: ids come from each member's
	// auto-increment offset, which follows its place in the view, so id 1
	// need not exist (and two updates of nothing do not conflict).
	tx1 := beginAt(t, ctx, c, "g1", "a")
	tx2 := beginAt(t, ctx, c, "g2", "b")
	var id int64
	if err := tx1.QueryRowContext(ctx, "SELECT MIN(id) FROM t").Scan(&id); err != nil {
		t.Fatal(err)
	}
	updateOne(t, ctx, tx1, id, 10)
	updateOne(t, ctx, tx2, id, 20)
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	err = tx2.Commit()
	if cl := c.Classify(err); cl.Code != "1213" || !cl.Retry || !cl.Conflict {
		t.Errorf("the losing commit: %v classified %+v, want 1213, retried, a conflict", err, cl)
	}
	t.Logf("the losing commit at g2: %v", err)
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "t")

	for _, other := range []string{"a", "b"} {
		if err := l.SetLink(other, "c", true, []string{"down"}); err != nil {
			t.Fatal(err)
		}
	}
	g3 := c.byName["g3"]
	pollUntil(t, ctx, "g3 out of the primary component", func() bool {
		st, err := g3.wsrepStatus(ctx)
		return err == nil && st["wsrep_cluster_status"] != "Primary"
	})
	var db3 *sql.DB
	db3, err = c.Open(ctx, "g3", "c")
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	_, err = db3.ExecContext(ctx, "INSERT INTO t (v) VALUES (3)")
	cl := c.Classify(err)
	t.Logf("write at the minority: %v -> %+v", err, cl)
	if cl.Code != "1047" || cl.Retry {
		t.Errorf("write at the cut-off node: %v classified %+v, want 1047 not retried", err, cl)
	}
	// The majority writes on (its first commit may wait for the new view).
	db1, err := c.Open(ctx, "g1", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer db1.Close()
	pollUntil(t, ctx, "a write at the majority", func() bool {
		_, err := db1.ExecContext(ctx, "INSERT INTO t (v) VALUES (2)")
		return err == nil
	})
	for range 20 {
		execAt(t, ctx, c, "g2", "INSERT INTO t (v) VALUES (2)")
	}
	st, err := c.ReplicationState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st {
		t.Logf("%s: %q backlog %d %s %v", r.Node, r.State, r.Backlog, r.BacklogUnit, r.Positions)
	}

	before, _ := os.ReadFile(g3.logPath)
	for _, other := range []string{"a", "b"} {
		if err := l.SetLink(other, "c", true, []string{"up"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitSynced(ctx, g3); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	sums := agree(t, ctx, c, "t")
	t.Logf("checksums after the heal: %v", sums)
	var n int
	if err := g3.query1(ctx, "SELECT count(*) FROM t", nil, &n); err != nil || n != 24 {
		t.Errorf("g3 has %d rows (%v), want 24", n, err)
	}
	b, _ := os.ReadFile(g3.logPath)
	if since := string(b[min(len(before), len(b)):]); !strings.Contains(since, "IST received") && !strings.Contains(since, "Receiving IST") {
		t.Errorf("g3's log since the heal names no IST:\n%s", enginekit.LastLines(since, 15))
	}
	// The lag probe reads what a node shows now, without a causal wait.
	lr, err := c.LagReader(ctx, "g3")
	if err != nil {
		t.Fatal(err)
	}
	wait := int32(-1)
	q := packet(0, append([]byte{comQuery}, "SELECT @@session.wsrep_sync_wait, 0"...))
	if err := lr.(*wireReader).query(ctx, q, func(w int32, _ int64) { wait = w }); err != nil || wait != 0 {
		t.Errorf("lag reader's wsrep_sync_wait = %d (%v), want 0 (the scheme's is 1)", wait, err)
	}
	lr.Close()

	// A crashed member starts again, rejoins and catches up.
	if err := c.Kill(ctx, "g2"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, ctx, "a write after g2's crash", func() bool {
		_, err := db1.ExecContext(ctx, "INSERT INTO t (v) VALUES (4)")
		return err == nil
	})
	g2 := c.byName["g2"]
	before, _ = os.ReadFile(g2.logPath)
	if err := c.Start(ctx, "g2"); err != nil {
		t.Fatal(err)
	}
	if err := c.waitSynced(ctx, g2); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(g2.logPath); !strings.Contains(string(b[min(len(before), len(b)):]), "IST received") {
		t.Errorf("g2 did not catch up by IST after its crash:\n%s", enginekit.LastLines(string(b[min(len(before), len(b)):]), 15))
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "t")

	ps, err := c.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	for _, p := range ps {
		roles[p.Role]++
	}
	t.Logf("threads: %v", roles)
	if roles["wsrep-applier"] == 0 {
		t.Error("no wsrep applier threads listed")
	}
}

// beginAt opens a transaction at node from site; it is rolled back (or
// its pool closed) when the test ends.
func beginAt(t *testing.T, ctx context.Context, c *cluster, node, site string) *sql.Tx {
	t.Helper()
	db, err := c.Open(ctx, node, site)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// updateOne sets v of row id in tx and fails unless exactly one row changed.
func updateOne(t *testing.T, ctx context.Context, tx *sql.Tx, id, v int64) {
	t.Helper()
	res, err := tx.ExecContext(ctx, "UPDATE t SET v = ? WHERE id = ?", v, id)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("UPDATE of row %d changed %d rows (%v), want 1", id, n, err)
	}
}

// pollUntil polls cond every 100 ms until it holds (bounded by ctx).
func pollUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's time", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

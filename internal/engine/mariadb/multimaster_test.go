package mariadb

import (
	"context"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
)

const mmSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "100ms"
[engine]
kind = "mariadb"
[node.m1]
site = "a"
role = "master"
[node.m2]
site = "b"
role = "master"
[scheme]
replication = "multimaster"
`

// TestMultimasterConflictDiverges: two-way asynchronous masters. Keys
// generated at both never collide (auto-increment offsets), but an update
// of one row at both masters within the link's delay is applied at each
// over the other's: the copies end different, replication keeps running,
// and the checksums show it.
func TestMultimasterConflictDiverges(t *testing.T) {
	t.Parallel()
	_, c := testCluster(t, "mdbmm", mmSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := c.Nodes()
	if len(engine.Sources(nodes)) != 2 || len(engine.Replicas(nodes)) != 2 {
		t.Fatalf("nodes: %+v", nodes)
	}
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{
		{Name: "t", Create: map[engine.Dialect]string{"mysql": "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)"}},
		{Name: "seq", Create: map[engine.Dialect]string{"mysql": "CREATE TABLE seq (id BIGINT AUTO_INCREMENT PRIMARY KEY, at VARCHAR(8))"}},
	}}); err != nil {
		t.Fatal(err)
	}
	execAt(t, ctx, c, "m1", "INSERT INTO t VALUES (1, 0)")
	for range 3 {
		execAt(t, ctx, c, "m1", "INSERT INTO seq (at) VALUES ('m1')")
		execAt(t, ctx, c, "m2", "INSERT INTO seq (at) VALUES ('m2')")
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "t", "seq")
	var rows int
	if err := c.byName["m2"].query1(ctx, "SELECT count(*) FROM seq", nil, &rows); err != nil || rows != 6 {
		t.Fatalf("seq at m2: %d rows (%v), want 6", rows, err)
	}
	// Two masters log only their own transactions (log_slave_updates off):
	// a master's binlog holds no GTID of the other's domain, so nothing it
	// applied travels back.
	for name, other := range map[string]string{"m1": "2", "m2": "1"} {
		var pos string
		if err := c.byName[name].query1(ctx, "SELECT @@global.gtid_binlog_pos", nil, &pos); err != nil {
			t.Fatal(err)
		}
		for _, gtid := range strings.Split(pos, ",") { // domain-server-seq
			if domain, _, _ := strings.Cut(strings.TrimSpace(gtid), "-"); domain == other {
				t.Errorf("%s's binlog holds %q: the other master's domain %s, which its dump would send back", name, pos, other)
			}
		}
	}

	// Both commit locally well within the 100 ms the other's change takes.
	execAt(t, ctx, c, "m1", "UPDATE t SET v = 1 WHERE id = 1")
	execAt(t, ctx, c, "m2", "UPDATE t SET v = 2 WHERE id = 1")
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	sums, err := c.Checksums(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := engine.Diverged(sums)
	if len(d) != 1 || d[0].Table != "t" {
		t.Fatalf("divergence %+v, want table t alone", d)
	}
	var v1, v2 int
	_ = c.byName["m1"].query1(ctx, "SELECT v FROM t WHERE id = 1", nil, &v1)
	_ = c.byName["m2"].query1(ctx, "SELECT v FROM t WHERE id = 1", nil, &v2)
	t.Logf("after crossing updates: m1 has v = %d, m2 has v = %d; checksums %v", v1, v2, d[0].Sums)
	st := idleStreams(t, ctx, c)
	for _, r := range st {
		t.Logf("%s <- %s: %q backlog %d %v", r.Node, r.From, r.State, r.Backlog, r.Positions)
		if r.Backlog != 0 || r.State != idleIO {
			t.Errorf("%s: replication did not stay quiet and running: %+v", r.Node, r)
		}
	}

	// Both insert the same new key: each master's row event then collides
	// with its own row, both SQL threads stop (slave_exec_mode = STRICT),
	// and nothing restarts them. Waiting for replication to flow ends at
	// once with the error, not after the stall timeout (over a minute here).
	execAt(t, ctx, c, "m1", "INSERT INTO t VALUES (2, 1)")
	execAt(t, ctx, c, "m2", "INSERT INTO t VALUES (2, 2)")
	wctx, wcancel := context.WithTimeout(ctx, 45*time.Second) // below flowTimeout: a stall would end as a deadline
	defer wcancel()
	err = c.WaitFlowing(wctx)
	if err == nil || !strings.Contains(err.Error(), "replication stopped at") || !strings.Contains(err.Error(), "Duplicate entry") {
		t.Fatalf("after crossing inserts of one key, WaitFlowing: %v; want replication stopped with the duplicate entry", err)
	}
	t.Logf("after crossing inserts: %v", err)
}

// idleIO is a replica's I/O thread between events.
const idleIO = "Waiting for master to send event"

// idleStreams reads the replication streams until each is idle and
// caught up, for up to 10 s, and returns the last reading: a stream
// passes through "Queueing master event to the relay log" for each
// event, the heartbeats included, so one reading may catch it there.
func idleStreams(t *testing.T, ctx context.Context, c *cluster) []engine.ReplicaState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.ReplicationState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		idle := true
		for _, r := range st {
			idle = idle && r.Backlog == 0 && r.State == idleIO
		}
		if idle || time.Now().After(deadline) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const ringSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
delay = "5ms"
[[link]]
sites = ["b", "c"]
delay = "5ms"
[[link]]
sites = ["c", "a"]
delay = "5ms"
[engine]
kind = "mariadb"
[node.m1]
site = "a"
role = "master"
[node.m2]
site = "b"
role = "master"
[node.m3]
site = "c"
role = "master"
[scheme]
replication = "multimaster"
`

// TestMultimasterRing: three masters in a ring (m1 -> m2 -> m3 -> m1):
// rows inserted at each reach the others through the ring, once, with
// keys that do not collide.
func TestMultimasterRing(t *testing.T) {
	t.Parallel()
	_, c := testCluster(t, "mdbring", ringSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{
		{Name: "seq", Create: map[engine.Dialect]string{"mysql": "CREATE TABLE seq (id BIGINT AUTO_INCREMENT PRIMARY KEY, at VARCHAR(8))"}},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		for range 5 {
			execAt(t, ctx, c, m, "INSERT INTO seq (at) VALUES (?)", m)
		}
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "seq")
	for _, m := range []string{"m1", "m2", "m3"} {
		var rows int
		if err := c.byName[m].query1(ctx, "SELECT count(*) FROM seq", nil, &rows); err != nil || rows != 15 {
			t.Errorf("%s has %d rows (%v), want 15", m, rows, err)
		}
	}
	st := idleStreams(t, ctx, c)
	for _, r := range st {
		if r.Backlog != 0 || r.State != idleIO {
			t.Errorf("%s <- %s: %+v", r.Node, r.From, r)
		}
	}
	if len(st) != 3 || st[0].From != "m3" {
		t.Errorf("streams %+v, want m1 <- m3 first", st)
	}
}

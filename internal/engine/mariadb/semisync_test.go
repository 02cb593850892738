package mariadb

import (
	"context"
	"testing"
	"time"

	"replab/internal/engine"
)

const semisyncSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "5ms"
[engine]
kind = "mariadb"
[node.p]
site = "a"
role = "primary"
[node.r]
site = "b"
role = "replica"
from = "p"
[node.r.settings]
# Notice the cut link within 2 s (heartbeats every second) and reconnect.
slave_net_timeout = "2"
[scheme]
replication = "semisync"
wait_point = "after_sync"
timeout = "1500ms"
`

// TestSemisyncFallsBackWhenCut: with its only replica cut off, a
// semi-synchronous commit waits for the timeout, the primary falls back to
// asynchronous (visible in the report and the replica's sync state), and
// comes back once the link heals and the replica catches up.
func TestSemisyncFallsBackWhenCut(t *testing.T) {
	t.Parallel()
	l, c := testCluster(t, "mdbsemi", semisyncSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "t",
		Create: map[engine.Dialect]string{"mysql": "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)"}}}}); err != nil {
		t.Fatal(err)
	}
	execAt(t, ctx, c, "p", "INSERT INTO t VALUES (1, 1)")
	waitReport(t, ctx, c, "semi-sync on with a client", func(r SemisyncReport) bool { return r.On && r.Clients == 1 && r.YesTx > 0 })
	if r, _ := c.Semisync(); r.Fallbacks != 0 || len(r.Periods) != 0 {
		t.Errorf("fallbacks while setting up: %+v", r)
	}

	if err := l.SetLink("a", "b", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	execAt(t, ctx, c, "p", "INSERT INTO t VALUES (2, 2)")
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("a commit with the replica cut off returned after %s; semi-sync waits 1.5 s", took)
	} else {
		t.Logf("commit with the replica cut off: %s (timeout 1.5 s)", took.Round(time.Millisecond))
	}
	waitReport(t, ctx, c, "fallback seen", func(r SemisyncReport) bool { return !r.On && r.Fallbacks >= 1 && len(r.Periods) == 1 })
	st, err := c.ReplicationState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].SyncState != "async-fallback" {
		t.Errorf("state while cut off: %+v, want sync state async-fallback", st)
	}
	// Asynchronous now: commits return at once.
	start = time.Now()
	execAt(t, ctx, c, "p", "INSERT INTO t VALUES (3, 3)")
	t.Logf("commit while asynchronous: %s", time.Since(start).Round(time.Millisecond))

	if err := l.SetLink("a", "b", true, []string{"up"}); err != nil {
		t.Fatal(err)
	}
	waitReport(t, ctx, c, "semi-sync back on", func(r SemisyncReport) bool { return r.On && len(r.Periods) == 1 && !r.Periods[0].End.IsZero() })
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(t, ctx, c, "t")
	r, _ := c.Semisync()
	t.Logf("fallbacks %d, asynchronous for %.0f ms, yes_tx %d, no_tx %d", r.Fallbacks, r.AsyncMs, r.YesTx, r.NoTx)
	if r.AsyncMs <= 0 || r.NoTx < 1 {
		t.Errorf("report after the heal: %+v", r)
	}
	st, err = c.ReplicationState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].SyncState != "semi-sync" || st[0].Backlog != 0 {
		t.Errorf("state after the heal: %+v", st[0])
	}
}

// waitReport polls the semi-sync report until cond holds (bounded by ctx).
func waitReport(t *testing.T, ctx context.Context, c *cluster, what string, cond func(SemisyncReport) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		r, ok := c.Semisync()
		if ok && cond(r) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not seen: last report %+v", what, r)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/spec"
)

// physLab builds a lab with a PostgreSQL cluster from spec text whose
// [lab] name is NAME, and removes both when the test ends.
func physLab(t *testing.T, prefix, text string) (*lab.Lab, *cluster) {
	t.Helper()
	l, c, _ := testCluster(t, prefix, text)
	return l, c
}

// sqlOn runs SQL on a node from its own site, over the lab network.
func sqlOn(t *testing.T, ctx context.Context, c *cluster, node, q string, args ...any) error {
	t.Helper()
	n := c.byName[node]
	cfg, err := pgx.ParseConfig(n.dsn())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = n.site.DialContext
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, q, args...)
	return err
}

// countOn returns the number of rows of a query on a node, or -1 when the
// query fails (e.g. the table has not replicated yet).
func countOn(t *testing.T, c *cluster, node, q string) int {
	t.Helper()
	var n int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.byName[node].query1(ctx, "", q, &n); err != nil {
		t.Logf("%s: %v", node, err)
		return -1
	}
	return n
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const physHeader = `
[lab]
name = "NAME"
[site.primary]
[site.eu]
[site.asia]
[[link]]
sites = ["primary", "eu"]
delay = "10ms"
rate = "1gbit"
[[link]]
sites = ["eu", "asia"]
delay = "15ms"
rate = "1gbit"
[engine]
kind = "postgres"
[node.p1]
site = "primary"
role = "primary"
`

func TestAsyncWithCascadingStandby(t *testing.T) {
	t.Parallel()
	_, c := physLab(t, "tasync", physHeader+`
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[node.a1]
site = "asia"
role = "standby"
from = "e1"
[scheme]
replication = "async"
durability = "write-nosync"
wal_compression = true
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "t", Create: map[engine.Dialect]string{"postgres": "CREATE TABLE t (id int PRIMARY KEY, v text)"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := sqlOn(t, ctx, c, "p1", "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 100) g"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"e1", "a1"} {
		eventually(t, 20*time.Second, "rows at "+n, func() bool { return countOn(t, c, n, "SELECT count(*) FROM t") == 100 })
	}
	// a1 streams from e1, not from the primary.
	st, err := c.ReplicationState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]string{}
	for _, r := range st {
		from[r.Node] = r.From
	}
	if from["e1"] != "p1" || from["a1"] != "e1" {
		t.Errorf("replication state %+v: want e1 from p1 and a1 from e1", st)
	}
	var fsync, walc string
	_ = c.byName["p1"].query1(ctx, "", "SHOW fsync", &fsync)
	_ = c.byName["p1"].query1(ctx, "", "SHOW wal_compression", &walc)
	if fsync != "off" || walc == "off" || walc == "" {
		t.Errorf("durability write-nosync + wal_compression: fsync=%s wal_compression=%s", fsync, walc)
	}
	procs, err := c.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]bool{}
	for _, p := range procs {
		roles[p.Node+"/"+p.Role] = true
	}
	for _, want := range []string{"p1/walsender", "p1/checkpointer", "p1/walwriter", "e1/walreceiver", "e1/startup", "e1/walsender", "a1/walreceiver"} {
		if !roles[want] {
			t.Errorf("no %s process; have %v", want, roles)
		}
	}

	t.Run("checksums agree at every standby and follow a change at the primary", func(t *testing.T) {
		if err := sqlOn(t, ctx, c, "p1", "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(101, 400) g"); err != nil {
			t.Fatal(err)
		}
		agreed := func(t *testing.T) int64 {
			t.Helper()
			if err := c.WaitFlowing(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			sums, err := c.Checksums(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("checksums of 400 rows at 3 nodes in %.0f ms: %v", float64(time.Since(start).Microseconds())/1000, sums)
			if len(sums) != 3 || len(sums["p1"]) != 1 || len(sums["e1"]) != 1 || len(sums["a1"]) != 1 {
				t.Fatalf("checksums %v: want table t at p1, e1 and a1", sums)
			}
			if d := engine.Diverged(sums); len(d) > 0 {
				t.Fatalf("the copies differ: %+v", d)
			}
			return sums["p1"]["t"]
		}
		before := agreed(t)
		// Two rows swap their values: the same values, in other rows.
		if err := sqlOn(t, ctx, c, "p1", `UPDATE t SET v = o.v FROM t o WHERE (t.id, o.id) IN ((101, 102), (102, 101))`); err != nil {
			t.Fatal(err)
		}
		after := agreed(t)
		if after == before {
			t.Errorf("checksum %d unchanged after two rows swapped their values", after)
		}
		all, err := c.Checksums(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all["e1"]) != 1 || all["e1"]["t"] != after {
			t.Errorf("checksums of every table %v: want t alone (replab_marker is replab's), %d", all, after)
		}
	})

	t.Run("a stopped standby is left out", func(t *testing.T) {
		if err := c.Stop(ctx, "a1"); err != nil {
			t.Fatal(err)
		}
		sums, err := c.Checksums(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sums["a1"]; ok || len(sums) != 2 {
			t.Errorf("checksums %v: want p1 and e1 only", sums)
		}
	})
}

func TestSyncCommitWaitsForPartitionedStandby(t *testing.T) {
	t.Parallel()
	l, c := physLab(t, "tsync", physHeader+`
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[scheme]
replication = "sync"
standbys = "FIRST 1 (e1)"
commit = "on"
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sqlOn(t, ctx, c, "p1", "CREATE TABLE s (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLink("primary", "eu", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sqlOn(t, ctx, c, "p1", "INSERT INTO s VALUES (1)") }()
	select {
	case err := <-done:
		t.Fatalf("commit returned (%v) while its only synchronous standby was partitioned", err)
	case <-time.After(2 * time.Second):
	}
	if n := countOn(t, c, "p1", "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"); n != 1 {
		t.Errorf("%d backends waiting in SyncRep, want 1", n)
	}
	// replab's own writes are bounded and say why they gave up.
	mctx, mcancel := context.WithTimeout(ctx, 2*time.Second)
	err := c.writeMarker(mctx, c.byName["p1"], 99)
	mcancel()
	if err == nil || !strings.Contains(err.Error(), "did not return") {
		t.Errorf("marker during partition: %v, want a 'did not return' error", err)
	}
	if err := l.SetLink("primary", "eu", true, []string{"up"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("commit after the partition healed: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("commit did not complete within 60 s after the partition healed")
	}
	eventually(t, 20*time.Second, "row at e1", func() bool { return countOn(t, c, "e1", "SELECT count(*) FROM s") == 1 })
}

func TestQuorumAnyOneSurvivesOnePartitionedStandby(t *testing.T) {
	t.Parallel()
	l, c := physLab(t, "tquorum", physHeader+`
[[link]]
sites = ["primary", "asia"]
delay = "20ms"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[node.a1]
site = "asia"
role = "standby"
from = "p1"
apply_delay = "1s"
[scheme]
replication = "sync"
standbys = "ANY 1 (e1, a1)"
commit = "remote_apply"
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sqlOn(t, ctx, c, "p1", "CREATE TABLE q (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLink("primary", "asia", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := sqlOn(t, cctx, c, "p1", "INSERT INTO q VALUES ($1)", i)
		ccancel()
		if err != nil {
			t.Fatalf("commit %d with one of two quorum standbys partitioned: %v", i, err)
		}
	}
	// remote_apply: e1 has applied every acknowledged commit.
	if n := countOn(t, c, "e1", "SELECT count(*) FROM q"); n != 5 {
		t.Errorf("e1 has %d rows right after 5 remote_apply commits, want 5", n)
	}
	var names string
	_ = c.byName["p1"].query1(ctx, "", "SHOW synchronous_standby_names", &names)
	if names != "ANY 1 (e1, a1)" {
		t.Errorf("synchronous_standby_names = %q", names)
	}
	var delay string
	_ = c.byName["a1"].query1(ctx, "", "SHOW recovery_min_apply_delay", &delay)
	if delay != "1s" {
		t.Errorf("a1 recovery_min_apply_delay = %q, want 1s", delay)
	}
}

func TestPlanValidation(t *testing.T) {
	base := `[lab]
name = "v"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "postgres"
`
	cases := []struct {
		name, text, want string
	}{
		{"unknown scheme lists schemes", `[node.p]
site = "a"
role = "primary"
[scheme]
replication = "paxos"`, `v.toml:13: scheme.replication: PostgreSQL has no scheme "paxos"; schemes: async, sync, logical, snapshot, multimaster, pipeline`},
		{"remote_apply needs sync", `[node.p]
site = "a"
role = "primary"
[node.s]
site = "b"
role = "standby"
from = "p"
[scheme]
commit = "remote_apply"`, `v.toml:17: scheme.commit: commit = "remote_apply" waits for synchronous standbys; use replication = "sync", or one of on, local, off`},
		{"sync standby must stream from the primary", `[node.p]
site = "a"
role = "primary"
[node.s]
site = "b"
role = "standby"
from = "p"
[node.c]
site = "b"
role = "standby"
from = "s"
port = 5433
[scheme]
replication = "sync"
standbys = "ANY 1 (s, c)"`, `scheme.standbys: "c" is not a standby streaming directly from the primary (those are: s); cascaded standbys cannot be synchronous`},
		{"quorum larger than the list", `[node.p]
site = "a"
role = "primary"
[node.s]
site = "b"
role = "standby"
from = "p"
[scheme]
replication = "sync"
standbys = "ANY 2 (s)"`, `2 synchronous standbys asked for, but 1 named`},
		{"masters need multimaster", `[node.m]
site = "a"
role = "master"
[node.p]
site = "b"
role = "primary"`, `node.m.role: replication = "async" has no master nodes`},
		{"nosync cannot wait", `[node.p]
site = "a"
role = "primary"
[node.s]
site = "b"
role = "standby"
from = "p"
[scheme]
replication = "sync"
durability = "nosync"
commit = "remote_apply"`, `durability = "nosync" means synchronous_commit = off`},
		{"apply_delay on a primary", `[node.p]
site = "a"
role = "primary"
apply_delay = "1s"`, `node.p.apply_delay: apply_delay holds back replay on a physical standby`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := spec.Parse("v.toml", []byte(base+tc.text))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = Engine{}.Validate(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
	good, err := spec.Load("../../../examples/pg-quorum.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(good)
	if err != nil {
		t.Fatal(err)
	}
	if p.syncNames != "ANY 1 (e1, a1)" || p.commit != "remote_apply" || !p.fsync {
		t.Errorf("pg-quorum plan %+v", p)
	}
}

package mariadb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/labtest"
	"replab/internal/testkit"
)

// requireMariaDB skips the test when labs cannot be built or MariaDB is
// not installed, saying what to do.
func requireMariaDB(t *testing.T) {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.MariaDB)
}

// testCluster brings up a lab and a MariaDB cluster from spec text whose
// [lab] name is NAME; both are removed when the test ends.
func testCluster(t *testing.T, prefix, text string) (*lab.Lab, *cluster) {
	t.Helper()
	requireMariaDB(t)
	l, c := labtest.Cluster(t, Engine{}, prefix, text)
	return l, c.(*cluster)
}

// execAt runs SQL at a node from its own site, over the lab network.
func execAt(t *testing.T, ctx context.Context, c *cluster, node, q string, args ...any) {
	t.Helper()
	db, err := c.Open(ctx, node, c.byName[node].Site)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		t.Fatalf("%s: %s: %v", node, q, err)
	}
}

// agree fails the test unless every node has the same checksums.
func agree(t *testing.T, ctx context.Context, c *cluster, tables ...string) map[string]map[string]int64 {
	t.Helper()
	sums, err := c.Checksums(ctx, tables...)
	if err != nil {
		t.Fatal(err)
	}
	if d := engine.Diverged(sums); len(d) > 0 {
		t.Fatalf("copies differ: %+v", d)
	}
	return sums
}

const asyncSpec = `
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
delay = "15ms"
[engine]
kind = "mariadb"
[node.p]
site = "a"
role = "primary"
[node.r1]
site = "b"
role = "replica"
from = "p"
[node.r2]
site = "c"
role = "replica"
from = "r1"
[scheme]
replication = "async"
parallel_threads = 2
`

// TestAsyncCascadingConverges: a primary, a replica and a replica of the
// replica; rows loaded in bulk and updated at the primary reach both with
// identical checksums, and the state reads as streaming with no backlog.
func TestAsyncCascadingConverges(t *testing.T) {
	t.Parallel()
	_, c := testCluster(t, "mdbasync", asyncSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{enginekit.LagTable(),
		{Name: "t", Create: map[engine.Dialect]string{"mysql": "CREATE TABLE t (id BIGINT PRIMARY KEY, k VARBINARY(16), v VARCHAR(100), n BIGINT)"}}}}); err != nil {
		t.Fatal(err)
	}
	ld, err := c.Loader(ctx, "p", "a")
	if err != nil {
		t.Fatal(err)
	}
	n, err := ld.Copy(ctx, "t", []string{"id", "k", "v", "n"}, &testRows{n: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.Exec(ctx, "ANALYZE TABLE t"); err != nil {
		t.Fatal(err)
	}
	ld.Close()
	if n != 5000 {
		t.Fatalf("loaded %d rows, want 5000", n)
	}
	for i := range 50 {
		execAt(t, ctx, c, "p", "UPDATE t SET n = n + 1, v = concat(v, 'x') WHERE id = ?", 1+i*97)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	sums := agree(t, ctx, c, "t")
	// The bulk path kept bytes that need escaping, at the far replica.
	var k []byte
	var v string
	if err := c.byName["r2"].query1(ctx, "SELECT k, v FROM t WHERE id = 300", nil, &k, &v); err != nil {
		t.Fatal(err)
	}
	want, _ := (&testRows{i: 300}).Values()
	if string(k) != string(want[1].([]byte)) || v != want[2].(string) {
		t.Errorf("row 300 at r2: k %q v %q, want %q %q", k, v, want[1], want[2])
	}
	if len(sums) != 3 {
		t.Fatalf("checksums of %d nodes, want 3", len(sums))
	}
	// The lag probe's stamps: reset at the primary, a tracked update, read
	// at the far replica by the cluster's own reader.
	stamps, update, err := enginekit.StampsOf(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := stamps.ResetLag(ctx, 4); err != nil {
		t.Fatal(err)
	}
	execAt(t, ctx, c, "p", update, 7, 2)
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	lr, err := stamps.LagReader(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]int64, 4)
	if err := lr.Positions(ctx, seqs); err != nil || seqs[2] != 7 || seqs[1] != 0 {
		t.Errorf("stamps at r2: %v (%v), want writer 2 at 7", seqs, err)
	}
	lr.Close()
	st, err := c.ReplicationState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 {
		t.Fatalf("%d streams, want 2: %+v", len(st), st)
	}
	for _, r := range st {
		t.Logf("%s <- %s: %q backlog %d %s %v", r.Node, r.From, r.State, r.Backlog, r.BacklogUnit, r.Positions)
		if r.Backlog != 0 || r.Position("gtid_current_pos") == "" {
			t.Errorf("%s: backlog %d, positions %v after WaitFlowing", r.Node, r.Backlog, r.Positions)
		}
	}
	ps, err := c.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	for _, p := range ps {
		roles[p.Node+"/"+p.Role]++
	}
	t.Logf("threads: %v", roles)
	for _, want := range []string{"p/binlog-dump", "r1/binlog-dump", "r1/replica-io", "r1/replica-sql", "r1/replica-worker", "r2/replica-sql", "p/innodb"} {
		if roles[want] == 0 {
			t.Errorf("no thread with role %s", want)
		}
	}
	// Every thread of every server has exactly one role (performance_schema
	// misses some; they count as unlisted), so no CPU goes uncounted. A
	// thread alive before and after the listing was alive during it.
	tasks := func() map[int]bool {
		out := map[int]bool{}
		for _, n := range c.nodes {
			es, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", n.pid()))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				tid, _ := strconv.Atoi(e.Name())
				out[tid] = true
			}
		}
		return out
	}
	before := tasks()
	ps, err = c.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := tasks()
	byTID := map[int]int{}
	for _, p := range ps {
		byTID[p.TID]++
	}
	for tid := range before {
		if after[tid] && byTID[tid] != 1 {
			t.Errorf("thread %d has %d roles, want 1", tid, byTID[tid])
		}
	}
}

// testRows yields (i, k, "row i", i) for i in 1..n, with bytes that need
// escaping in k.
type testRows struct{ i, n int64 }

func (r *testRows) Next() bool { r.i++; return r.i <= r.n }
func (r *testRows) Values() ([]any, error) {
	return []any{r.i, []byte{byte(r.i), '\t', '\n', '\\', 0, byte(r.i >> 8)}, "row\t" + string(rune('a'+r.i%26)), r.i}, nil
}
func (r *testRows) Err() error { return nil }

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
	"replab/internal/engine/mariadb"
	"replab/internal/lab"
	"replab/internal/labtest"
	"replab/internal/spec"
	"replab/internal/testkit"
)

// requirePostgres skips a test when PostgreSQL is not installed (labtest
// checks the rest).
func requirePostgres(t testing.TB) {
	t.Helper()
	testkit.Need(t, testkit.Postgres)
}

// testCluster brings up spec text (its lab named NAME) with this engine
// through labtest, which removes everything when the test ends and checks
// nothing is left; the engine's progress lines go to the test log.
func testCluster(t *testing.T, prefix, text string) (*lab.Lab, *cluster, *testLog) {
	t.Helper()
	testkit.Need(t, testkit.Lab)
	requirePostgres(t)
	log := &testLog{t: t}
	start := time.Now()
	l, c := labtest.ClusterLog(t, Engine{Engines: testEngines.Get}, prefix, text, log)
	t.Logf("cluster up in %.1f s", time.Since(start).Seconds())
	return l, c.(*cluster), log
}

// testEngines are the engines a test cluster may run servers of: the
// pipeline scheme's MariaDB sinks. (In replab, the registry of
// cmd/replab/engines.go; no engine package imports another.)
var testEngines = engine.NewRegistry(mariadb.Engine{})

// testLog passes a cluster's progress lines to the test log.
type testLog struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (w *testLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// open connects to a node from a site, closing the pool when the test ends.
func open(t *testing.T, c *cluster, node, site string) *sql.DB {
	t.Helper()
	db, err := c.Open(context.Background(), node, site)
	if err != nil {
		t.Fatalf("open %s: %v", node, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func run(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// dump renders a query's rows as "a b c | d e f".
func dump(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var f []string
		for _, v := range vals {
			if v.Valid {
				f = append(f, v.String)
			} else {
				f = append(f, "NULL")
			}
		}
		out = append(out, strings.Join(f, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " | ")
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func table(name, ddl string) engine.Table {
	return engine.Table{Name: name, Create: map[engine.Dialect]string{"postgres": ddl}}
}

var logicalSpec = testkit.ReadFile("testdata/logical.toml")

// TestLogicalReplicas runs a primary with a full replica (r1) and a
// partial one (r2: per filtered by row and column, item by row, other not
// at all) through inserts, updates and deletes.
func TestLogicalReplicas(t *testing.T) {
	t.Parallel()
	_, c, _ := testCluster(t, "tlog", logicalSpec)
	ctx := ctxFor(t, 2*time.Minute)

	start := time.Now()
	err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{
		table("per", "CREATE TABLE per (id int PRIMARY KEY, region text NOT NULL, name text NOT NULL, salary int NOT NULL)"),
		table("item", "CREATE TABLE item (id int PRIMARY KEY, qty int NOT NULL, note text)"),
		table("other", "CREATE TABLE other (id int PRIMARY KEY, v text)"),
	}})
	if err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	t.Logf("schema applied in %.1f s", time.Since(start).Seconds())
	p, r1, r2 := open(t, c, "p1", "p"), open(t, c, "r1", "a"), open(t, c, "r2", "b")
	flow := func() {
		t.Helper()
		if err := c.WaitFlowing(ctx); err != nil {
			t.Fatalf("wait flowing: %v", err)
		}
	}
	type want struct{ r1per, r2per, r1item, r2item, r1other string }
	check := func(t *testing.T, w want) {
		t.Helper()
		for _, x := range []struct {
			db         *sql.DB
			query, exp string
		}{
			{r1, "SELECT * FROM per ORDER BY id", w.r1per},
			{r2, "SELECT * FROM per ORDER BY id", w.r2per},
			{r1, "SELECT * FROM item ORDER BY id", w.r1item},
			{r2, "SELECT * FROM item ORDER BY id", w.r2item},
			{r1, "SELECT * FROM other ORDER BY id", w.r1other},
			{r2, "SELECT * FROM other ORDER BY id", ""},
		} {
			if got := dump(t, x.db, x.query); got != x.exp {
				t.Errorf("%s: got %q, want %q", x.query, got, x.exp)
			}
		}
	}

	t.Run("replica identity follows the filters", func(t *testing.T) {
		got := dump(t, p, "SELECT relname, relreplident FROM pg_class WHERE relname IN ('per', 'item', 'other') ORDER BY relname")
		if want := "item f | other d | per i"; got != want {
			t.Errorf("relreplident: got %q, want %q", got, want)
		}
		if got, want := dump(t, r2, "SELECT attname FROM pg_attribute WHERE attrelid = 'per'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum"), "id | region | name"; got != want {
			t.Errorf("columns of per at the partial replica: got %q, want %q", got, want)
		}
	})

	run(t, p,
		"INSERT INTO per VALUES (1, 'eu', 'ann', 100), (2, 'us', 'bob', 200), (3, 'eu', 'cid', 300)",
		"INSERT INTO item VALUES (1, 5, 'few'), (2, 50, 'many')",
		"INSERT INTO other VALUES (1, 'x')")
	flow()
	t.Run("inserts reach the full replica whole and the partial one filtered", func(t *testing.T) {
		check(t, want{
			r1per: "1 eu ann 100 | 2 us bob 200 | 3 eu cid 300", r2per: "1 eu ann | 3 eu cid",
			r1item: "1 5 few | 2 50 many", r2item: "2 50 many",
			r1other: "1 x",
		})
	})

	run(t, p,
		"UPDATE per SET name = 'ann2', salary = 110 WHERE id = 1", // stays in the filter
		"UPDATE per SET region = 'us' WHERE id = 3",               // leaves it: deleted at r2
		"UPDATE per SET region = 'eu' WHERE id = 2",               // enters it: inserted at r2
		"UPDATE item SET qty = 5 WHERE id = 2",
		"UPDATE item SET qty = 20 WHERE id = 1",
		"UPDATE other SET v = 'y' WHERE id = 1")
	flow()
	t.Run("updates replicate and move rows into and out of a row filter", func(t *testing.T) {
		check(t, want{
			r1per: "1 eu ann2 110 | 2 eu bob 200 | 3 us cid 300", r2per: "1 eu ann2 | 2 eu bob",
			r1item: "1 20 few | 2 5 many", r2item: "1 20 few",
			r1other: "1 y",
		})
	})

	run(t, p, "DELETE FROM per WHERE id IN (1, 3)", "DELETE FROM item WHERE id = 1", "DELETE FROM other")
	flow()
	t.Run("deletes replicate", func(t *testing.T) {
		check(t, want{r1per: "2 eu bob 200", r2per: "2 eu bob", r1item: "2 5 many", r2item: ""})
	})

	t.Run("checksums compare the primary and the full replica, not the partial one", func(t *testing.T) {
		run(t, p, "INSERT INTO other SELECT g, md5(g::text) FROM generate_series(1, 300) g")
		flow()
		sums, err := c.Checksums(ctx, "per", "item", "other")
		if err != nil {
			t.Fatal(err)
		}
		if len(sums) != 2 || len(sums["p1"]) != 3 || len(sums["r1"]) != 3 {
			t.Fatalf("checksums %v: want per, item and other at p1 and r1 (r2 has filters)", sums)
		}
		if d := engine.Diverged(sums); len(d) > 0 {
			t.Errorf("the copies differ: %+v", d)
		}
	})

	t.Run("values swapped between two rows at the full replica are a divergence", func(t *testing.T) {
		// A write at the replica itself, which the primary never sees:
		// both rows, both values, only their pairing differs.
		swap := "UPDATE other SET v = o.v FROM other o WHERE (other.id, o.id) IN ((1, 2), (2, 1))"
		run(t, r1, swap)
		sums, err := c.Checksums(ctx, "per", "item", "other")
		if err != nil {
			t.Fatal(err)
		}
		d := engine.Diverged(sums)
		if len(d) != 1 || d[0].Table != "other" || d[0].Sums["p1"] == d[0].Sums["r1"] {
			t.Errorf("diverged %+v, want table other alone, with different sums at p1 and r1 (all: %v)", d, sums)
		}
		run(t, r1, swap) // back as the primary has it
		sums, err = c.Checksums(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		if d := engine.Diverged(sums); len(d) > 0 {
			t.Errorf("swapped back, the copies still differ: %+v", d)
		}
	})

	t.Run("no apply errors at the replicas", func(t *testing.T) {
		for _, db := range []*sql.DB{r1, r2} {
			if got := dump(t, db, "SELECT apply_error_count, sync_error_count FROM pg_stat_subscription_stats"); got != "0 0" {
				t.Errorf("errors: %s", got)
			}
		}
	})

	t.Run("replication state names each replica", func(t *testing.T) {
		rs, err := c.ReplicationState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]engine.ReplicaState{}
		for _, r := range rs {
			got[r.Node] = r
		}
		for _, name := range []string{"r1", "r2"} {
			r, ok := got[name]
			if !ok || r.From != "p1" || r.Kind != "logical" || r.State != "streaming" {
				t.Errorf("%s: got %+v (all: %+v)", name, r, rs)
			}
		}
	})

	t.Run("filters that cannot work under PostgreSQL 15 are refused at their line", func(t *testing.T) {
		err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{
			table("bad", "CREATE TABLE bad (id int PRIMARY KEY, note text)"),
			table("bad2", "CREATE TABLE bad2 (id int PRIMARY KEY, note text)"),
		}})
		if err == nil {
			t.Fatal("no error")
		}
		t.Logf("refused as expected:\n%v", err)
		msg := err.Error()
		for _, want := range []string{
			fmt.Sprintf("tlog.toml:%d: node.r2.table[3].columns: table bad: the column list must include the primary key (id)", lineOf(logicalSpec, `name = "bad"`)-1),
			fmt.Sprintf("tlog.toml:%d: node.r2.table[4].where: table bad2: the row filter reads note", lineOf(logicalSpec, `name = "bad2"`)-1),
			"needs note NOT NULL",
			"node.r2.table[4].columns: table bad2: the column list must include note",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("error lacks %q:\n%s", want, msg)
			}
		}
		if got := dump(t, p, "SELECT count(*) FROM pg_publication_tables WHERE tablename LIKE 'bad%'"); got != "0" {
			t.Errorf("refused tables were published anyway: %s", got)
		}
	})
}

const snapshotSpec = `
[lab]
name = "NAME"

[site.p]
[site.a]

[[link]]
sites = ["p", "a"]
delay = "5ms"

[engine]
kind = "postgres"

[node.p1]
site = "p"
role = "primary"

[node.r1]
site = "a"
role = "replica"
from = "p1"

[scheme]
replication = "snapshot"
refresh = "3s"
`

// TestSnapshotRefresh checks that a snapshot replica changes only at its
// refreshes, scheduled or forced.
func TestSnapshotRefresh(t *testing.T) {
	t.Parallel()
	_, c, log := testCluster(t, "tsnap", snapshotSpec)
	ctx := ctxFor(t, 2*time.Minute)
	if err := c.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{
		table("per", "CREATE TABLE per (id int PRIMARY KEY, name text)"),
	}}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	p, r1 := open(t, c, "p1", "p"), open(t, c, "r1", "a")
	// waitRound waits until a refresh begun after the call has finished:
	// one under way may have taken the primary's position before the
	// change the test just made.
	waitRound := func() {
		t.Helper()
		want := c.lg.started.Load() + 1
		deadline := time.Now().Add(15 * time.Second)
		for c.lg.rounds.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("no refresh within 15 s (refresh = %s)", c.plan.refresh)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	run(t, p, "INSERT INTO per VALUES (1, 'before')")
	waitRound()
	run(t, p, "INSERT INTO per VALUES (2, 'after')")

	t.Run("between refreshes the replica does not change", func(t *testing.T) {
		if got, want := dump(t, r1, "SELECT * FROM per ORDER BY id"), "1 before"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if got := dump(t, r1, "SELECT subenabled FROM pg_subscription"); got != "false" {
			t.Errorf("subscription enabled: %s", got)
		}
		if got := dump(t, r1, "SELECT count(*) FROM pg_stat_subscription WHERE pid IS NOT NULL"); got != "0" {
			t.Errorf("workers running: %s", got)
		}
		rs, err := c.ReplicationState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Node != "r1" || rs[0].From != "p1" || rs[0].Kind != "logical" || rs[0].State != "inactive" || rs[0].Backlog <= 0 || rs[0].BacklogUnit != engine.UnitBytes {
			t.Errorf("replication state: %+v", rs)
		}
	})

	waitRound()
	t.Run("the next scheduled refresh brings the change", func(t *testing.T) {
		if got, want := dump(t, r1, "SELECT * FROM per ORDER BY id"), "1 before | 2 after"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if !strings.Contains(log.String(), "node r1: refresh (scheduled) from p1:") {
			t.Errorf("no scheduled refresh logged")
		}
	})

	t.Run("a forced refresh brings changes at once", func(t *testing.T) {
		run(t, p, "UPDATE per SET name = 'forced' WHERE id = 1", "DELETE FROM per WHERE id = 2")
		r, ok := engine.Cluster(c).(interface{ Refresh(context.Context) error })
		if !ok {
			t.Fatal("the cluster has no Refresh")
		}
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := dump(t, r1, "SELECT * FROM per ORDER BY id"), "1 forced"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		sums, err := c.Checksums(ctx, "per")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sums["r1"]; !ok || len(engine.Diverged(sums)) > 0 {
			t.Errorf("checksums after the refresh %v: want the same at p1 and r1", sums)
		}
	})
}

// lineOf returns the 1-based line of text holding needle.
func lineOf(text, needle string) int {
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, needle) {
			return i + 1
		}
	}
	return 0
}

// TestLogicalPlanErrors checks that makePlan refuses nodes and settings
// that do not fit logical and snapshot replication, at their file:line.
func TestLogicalPlanErrors(t *testing.T) {
	const head = `[lab]
name = "x"
[site.p]
[site.a]
[engine]
kind = "postgres"
[node.p1]
site = "p"
role = "primary"
`
	cases := []struct {
		name, body, at, want string
	}{
		{"a standby under logical replication",
			"[node.e1]\nsite = \"a\"\nrole = \"standby\" # here\nfrom = \"p1\"\n[scheme]\nreplication = \"logical\"\n",
			"# here", `node.e1.role: replication = "logical" has no standby nodes; use role = "replica"`},
		{"a master under snapshot replication",
			"[node.m1]\nsite = \"a\"\nrole = \"master\" # here\n[scheme]\nreplication = \"snapshot\"\n",
			"# here", `node.m1.role: replication = "snapshot" has no master nodes`},
		{"a replica under physical replication",
			"[node.r1]\nsite = \"a\"\nrole = \"replica\" # here\nfrom = \"p1\"\n[scheme]\nreplication = \"async\"\n",
			"# here", `node.r1.role: replication = "async" has no replica nodes`},
		{"a replica of a replica",
			"[node.r1]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"p1\"\n[node.r2]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"r1\" # here\n[scheme]\nreplication = \"logical\"\n",
			"# here", "node.r2.from: PostgreSQL 15 logical replicas subscribe to the primary; r1 is a replica"},
		{"refresh without snapshot",
			"[node.r1]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"p1\"\n[scheme]\nreplication = \"logical\"\nrefresh = \"10s\" # here\n",
			"# here", `scheme.refresh: refresh sets how often snapshot replicas catch up; it needs replication = "snapshot"`},
		{"table filters on a standby",
			"[node.e1] # here\nsite = \"a\"\nrole = \"standby\"\nfrom = \"p1\"\n[[node.e1.table]]\nname = \"per\"\n[scheme]\nreplication = \"async\"\n",
			"# here", "node.e1.table: table filters make a logical replica partial; node e1 is a standby"},
		{"a filter on the marker table",
			"[node.r1]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"p1\"\n[[node.r1.table]] # here\nname = \"replab_marker\"\n[scheme]\nreplication = \"logical\"\n",
			"# here", "node.r1.table[1].name: replab_marker carries replab's markers"},
		{"an unbalanced row filter",
			"[node.r1]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"p1\"\n[[node.r1.table]] # here\nname = \"per\"\nwhere = \"region = 'eu') OR (true\"\n[scheme]\nreplication = \"snapshot\"\n",
			"# here", "node.r1.table[1].where: unbalanced parentheses or quotes"},
		{"a column listed twice",
			"[node.r1]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"p1\"\n[[node.r1.table]] # here\nname = \"per\"\ncolumns = [\"id\", \"ID\"]\n[scheme]\nreplication = \"logical\"\n",
			"# here", "node.r1.table[1].columns: column id listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := head + tc.body
			s, err := spec.Parse("v.toml", []byte(text))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err = makePlan(s)
			if err == nil {
				t.Fatal("makePlan accepted it")
			}
			want := fmt.Sprintf("v.toml:%d: %s", lineOf(text, tc.at), tc.want)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("got:\n%v\nwant a line containing:\n%s", err, want)
			}
		})
	}
	t.Run("a partial logical replica is accepted", func(t *testing.T) {
		text := head + "[node.r1]\nsite = \"a\"\nrole = \"replica\"\nfrom = \"p1\"\n[[node.r1.table]]\nname = \"per\"\nwhere = \"region = 'eu' AND name <> 'x''y'\"\ncolumns = [\"id\", \"region\"]\n[scheme]\nreplication = \"logical\"\n"
		s, err := spec.Parse("v.toml", []byte(text))
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		if _, err := makePlan(s); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLogicalExamplesValidate keeps the example specs valid.
func TestLogicalExamplesValidate(t *testing.T) {
	for _, name := range []string{"pg-logical.toml", "pg-snapshot.toml"} {
		t.Run(name, func(t *testing.T) {
			s, err := spec.Load("../../../examples/" + name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := makePlan(s)
			if err != nil {
				t.Fatal(err)
			}
			if p.replication != strings.TrimSuffix(strings.TrimPrefix(name, "pg-"), ".toml") {
				t.Errorf("replication = %q", p.replication)
			}
		})
	}
}

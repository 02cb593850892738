package orderentry

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"testing"
	"time"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/mariadb"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/labtest"
	"replab/internal/testkit"
	"replab/internal/workload"
)

// What the PostgreSQL and MariaDB tests share: a cluster with a source and
// an asynchronous copy, loaded through the engine's bulk path, driven by
// the driver with every type, then checked for convergence.

// setUp applies the schema and loads w at the cluster's first node from
// its own site, and checks every table's rows there. It returns a pool
// on that node from site client.
func setUp(t *testing.T, ctx context.Context, c engine.Cluster, w *Workload, client string) *sql.DB {
	t.Helper()
	sc := c.(engine.SQL)
	if err := sc.ApplySchema(ctx, w.Schema()); err != nil {
		t.Fatal(err)
	}
	node := c.Nodes()[0]
	ld, err := c.(engine.BulkLoader).Loader(ctx, node.Name, node.Site)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var last int64
	if err := w.Load(ctx, ld, func(n int64) { last = n }); err != nil {
		ld.Close()
		t.Fatal(err)
	}
	ld.Close()
	took := time.Since(start)
	t.Logf("loaded %d rows (%d customers) in %s: %.0f rows/s", last, w.customers, took.Round(time.Millisecond), float64(last)/took.Seconds())
	if last != w.TotalRows() {
		t.Errorf("last progress %d, TotalRows %d", last, w.TotalRows())
	}
	db, err := sc.Open(ctx, node.Name, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for name, want := range w.TableRows() {
		var got int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %d rows, want %d", name, got, want)
		}
	}
	return db
}

// drive runs every type for a few seconds with users users and wants each
// committed, none failed.
func drive(t *testing.T, ctx context.Context, c engine.Cluster, w *Workload, db *sql.DB, users int, pipeline bool) *driver.Result {
	t.Helper()
	cfg := driver.Config{Users: users, Duration: 3 * time.Second, Seed: 7, MaxRetries: 3, MaxErrorPct: 100,
		Classify: func(err error) engine.ErrorClass { return engine.Classify(c, err) }}
	if p, ok := c.(engine.Pipeliner); ok && pipeline {
		cfg.Pipeliner = p
	}
	res, err := driver.Run(ctx, cfg, w.Transactions(), driver.Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, name := range typeNames {
		tr := res.Types[name]
		if tr == nil || tr.Count == 0 {
			t.Errorf("%s: nothing committed: %+v", name, tr)
			continue
		}
		if len(tr.Errors) > 0 {
			t.Errorf("%s: errors %v", name, tr.Errors)
		}
		total += tr.Count
		t.Logf("%-16s %5d committed, %d retries, p50 %.2f ms, p99 %.2f ms", name, tr.Count, tr.Retries, tr.LatencyMs.P50, tr.LatencyMs.P99)
	}
	t.Logf("%d users (pipelined %t): %.0f transactions/s", users, cfg.Pipeliner != nil, float64(total)/cfg.Duration.Seconds())
	return res
}

// converge waits until every copy has every change and wants the copies'
// checksums equal, at two nodes or more.
func converge(t *testing.T, ctx context.Context, c engine.Cluster) {
	t.Helper()
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range tables {
		names = append(names, tb.name)
	}
	sums, err := c.(engine.Checksummer).Checksums(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) < 2 {
		t.Fatalf("checksums of %d nodes, want the source and its copy", len(sums))
	}
	if d := engine.Diverged(sums); len(d) > 0 {
		t.Fatalf("copies differ: %+v", d)
	}
}

// runEach runs n transactions of each type, one after another on one
// connection as user 0, statement by statement (the types' Run), after
// reset; after is called with each type's name and n.
func runEach(t *testing.T, ctx context.Context, db *sql.DB, w *Workload, n int, reset func(), after func(name string, n int)) {
	t.Helper()
	sc, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, typ := range w.Transactions() {
		stmts := map[string]*sql.Stmt{}
		for _, q := range typ.Statements {
			if stmts[q.Name], err = sc.PrepareContext(ctx, q.SQL); err != nil {
				t.Fatalf("%s: prepare %q: %v", typ.Name, q.SQL, err)
			}
		}
		reset()
		r := rand.New(rand.NewPCG(uint64(len(typ.Name)), 1))
		for i := 0; i < n; i++ {
			tx, err := sc.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := typ.Run(ctx, workload.NewTx(0, tx, stmts), r); err != nil {
				tx.Rollback()
				t.Fatalf("%s #%d: %v", typ.Name, i, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		after(typ.Name, n)
		for _, st := range stmts {
			st.Close()
		}
	}
}

const mariadbSpec = `
[lab]
name = "NAME"
[site.db]
[site.copy]
[site.client]
[[link]]
sites = ["db", "client"]
delay = "1ms"
[[link]]
sites = ["db", "copy"]
delay = "5ms"
[engine]
kind = "mariadb"
[node.p]
site = "db"
role = "primary"
[node.r]
site = "copy"
role = "replica"
from = "p"
[scheme]
replication = "async"
[workload]
kind = "order-entry"
customers = 1000
[run]
users = 4
seed = 3
`

// TestMariaDBLoadRunConverge: on MariaDB with an asynchronous replica,
// the load makes every table's rows, each type runs statement by statement
// as user 0, four users run every type for three seconds without an
// error, and the replica ends with the same rows.
func TestMariaDBLoadRunConverge(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.MariaDB)
	l, c := labtest.Cluster(t, mariadb.Engine{}, "oemdb", mariadbSpec)
	ww, err := workload.NewRegistry(Factory).For(l.Spec, "mysql")
	if err != nil {
		t.Fatal(err)
	}
	w := ww.(*Workload)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := setUp(t, ctx, c, w, "client")
	runEach(t, ctx, db, w, 10, func() {}, func(string, int) {})
	drive(t, ctx, c, w, db, 4, false)
	converge(t, ctx, c)
}

const postgresSpec = `
[lab]
name = "NAME"
[site.db]
[site.copy]
[site.client]
[[link]]
sites = ["db", "client"]
delay = "1ms"
[[link]]
sites = ["db", "copy"]
delay = "5ms"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
[node.p1.settings]
shared_preload_libraries = "pg_stat_statements"
[node.s1]
site = "copy"
role = "standby"
from = "p1"
[scheme]
replication = "async"
[workload]
kind = "order-entry"
[run]
users = 4
seed = 3
`

// TestPostgresLoadRunConverge: on PostgreSQL with an asynchronous
// standby, the default load makes every table's rows and about the bytes
// DataBytes says; each type run statement by statement sends the
// statements Statements counts (pg_stat_statements), so the mix is the
// one Mix computes; four users run every type (pipelined where it can)
// without an error; the standby ends with the same rows.
func TestPostgresLoadRunConverge(t *testing.T) {
	t.Parallel()
	l, c := pgtest.Up(t, "oepg", postgresSpec)
	ww, err := workload.NewRegistry(Factory).For(l.Spec, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	w := ww.(*Workload)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := setUp(t, ctx, c, w, "client")

	// Bytes, tables and indexes together, per table.
	var size int64
	rows, err := db.QueryContext(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 2 DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		if _, ok := w.TableRows()[name]; ok {
			size += n
			t.Logf("%-22s %9d rows %10d bytes", name, w.TableRows()[name], n)
		}
	}
	rows.Close()
	t.Logf("%d customers, %d warehouses: %d bytes with indexes; DataBytes says %d", w.customers, w.Warehouses(), size, w.DataBytes())
	if est := w.DataBytes(); est < size*8/10 || est > size*12/10 {
		t.Errorf("DataBytes %d, measured %d: more than 20 %% apart", est, size)
	}

	// Statements by verb, per type, as pg_stat_statements counts them.
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	reset := func() {
		if _, err := db.ExecContext(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			t.Fatal(err)
		}
	}
	measured := map[string]Counts{}
	runEach(t, ctx, db, w, 40, reset, func(name string, n int) {
		got := verbs(t, ctx, db)
		got = Counts{got.Select / float64(n), got.Insert / float64(n), got.Update / float64(n)}
		want := w.Statements(name)
		t.Logf("%-16s per transaction: %.2f selects, %.2f inserts, %.2f updates (Statements: %.2f, %.2f, %.2f)", name, got.Select, got.Insert, got.Update, want.Select, want.Insert, want.Update)
		near := func(g, w float64) bool { return g >= w*0.75-0.01 && g <= w*1.25+0.01 }
		if name == ProcessOrders {
			// Alone, one user soon processes every order waiting at its
			// warehouse: then it finds none and updates nothing.
			near = func(g, w float64) bool { return g <= w }
		}
		if !near(got.Select, want.Select) || !near(got.Insert, want.Insert) || !near(got.Update, want.Update) {
			t.Errorf("%s: %.2f/%.2f/%.2f statements per transaction, Statements counts %.2f/%.2f/%.2f", name, got.Select, got.Insert, got.Update, want.Select, want.Insert, want.Update)
		}
		if name == OrderProducts && (got.Insert != got.Select+1 || got.Update != got.Select) {
			t.Errorf("order_products: %.2f selects, %.2f inserts, %.2f updates: want one more insert than selects, as many updates", got.Select, got.Insert, got.Update)
		}
		measured[name] = got
	})

	// Every type together, pipelined where it can be: the statements sent
	// are those Statements counts for the transactions run (which follow
	// the weights only as closely as a few hundred random picks can).
	reset()
	res := drive(t, ctx, c, w, db, 4, true)
	sent := verbs(t, ctx, db)
	var counted Counts
	var n float64
	for _, name := range typeNames {
		k, st := float64(res.Types[name].Count), w.Statements(name)
		n += k
		counted = Counts{counted.Select + k*st.Select, counted.Insert + k*st.Insert, counted.Update + k*st.Update}
	}
	got, want, mix := share(sent), share(counted), w.Mix()
	t.Logf("mix sent: %.1f %% selects, %.1f %% inserts, %.1f %% updates; Statements for the transactions run: %.1f/%.1f/%.1f; Mix for the weights: %.1f/%.1f/%.1f",
		100*got.Select, 100*got.Insert, 100*got.Update, 100*want.Select, 100*want.Insert, 100*want.Update, 100*mix.Select, 100*mix.Insert, 100*mix.Update)
	if d := max(abs(got.Select-want.Select), abs(got.Insert-want.Insert), abs(got.Update-want.Update)); d > 0.02 {
		t.Errorf("mix sent %.3f/%.3f/%.3f, Statements say %.3f/%.3f/%.3f", got.Select, got.Insert, got.Update, want.Select, want.Insert, want.Update)
	}
	// How many products a browse looks at is random (a few hundred
	// browses make its mean ±5 %), and statements of transactions cut off
	// at the end are sent but not counted (at most one a user).
	if d := sent.Total() - counted.Total(); d < -0.06*counted.Total() || d > 0.06*counted.Total()+4*12 {
		t.Errorf("%.0f statements sent, %.0f counted for %.0f transactions", sent.Total(), counted.Total(), n)
	}
	converge(t, ctx, c)
}

// verbs counts the statements on the workload's tables pg_stat_statements
// saw, by verb.
func verbs(t *testing.T, ctx context.Context, db *sql.DB) Counts {
	t.Helper()
	rows, err := db.QueryContext(ctx, `SELECT upper(split_part(ltrim(query), ' ', 1)), sum(calls)::bigint FROM pg_stat_statements
		WHERE query ~ '(customers|addresses|card_details|logon|product_information|inventories|orders|order_items)' AND query NOT LIKE '%pg_stat_statements%' GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got Counts
	for rows.Next() {
		var verb string
		var calls int64
		if err := rows.Scan(&verb, &calls); err != nil {
			t.Fatal(err)
		}
		switch verb {
		case "SELECT":
			got.Select = float64(calls)
		case "INSERT":
			got.Insert = float64(calls)
		case "UPDATE":
			got.Update = float64(calls)
		default:
			t.Errorf("%d %s statements", calls, verb)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// share is c as shares of its total.
func share(c Counts) Counts {
	t := c.Total()
	return Counts{c.Select / t, c.Insert / t, c.Update / t}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

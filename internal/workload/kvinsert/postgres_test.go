package kvinsert

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres/pgtest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"replab/internal/workload"
)

const kvSpec = `
[lab]
name = "NAME"
[site.db]
[site.client]
[[link]]
sites = ["db", "client"]
delay = "2ms"
rate = "1gbit"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
[workload]
kind = "kv-insert"
preload = 200000
[run]
seed = 11
`

func TestPostgresLoadAndInserts(t *testing.T) {
	t.Parallel()
	l, c := pgtest.Up(t, "wkv", kvSpec)
	ww, err := workload.NewRegistry(Factory).For(l.Spec, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	w := ww.(*Workload)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.(engine.SQL).ApplySchema(ctx, w.Schema()); err != nil {
		t.Fatal(err)
	}
	node := c.Nodes()[0]

	conn, err := pgx.ConnectConfig(ctx, pgtest.ConnConfig(t, l, node, node.Site))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var last int64
	start := time.Now()
	ld, err := c.(engine.BulkLoader).Loader(ctx, node.Name, node.Site)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if err := w.Load(ctx, ld, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("preloaded %d rows in %s: %.0f rows/s", last, took.Round(time.Millisecond), float64(last)/took.Seconds())
	count := func() (n, keyLen, valueLen int64) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT count(*), max(length(k)), max(length(v)) FROM kv").Scan(&n, &keyLen, &valueLen); err != nil {
			t.Fatal(err)
		}
		return n, keyLen, valueLen
	}
	if n, k, v := count(); n != 200000 || last != 200000 || k != 10 || v != 100 {
		t.Errorf("kv: %d rows (progress said %d), keys of %d and values of %d bytes; want 200000 rows, 10 and 100", n, last, k, v)
	}

	// The insert 100 times from the client site, prepared once on one
	// connection, by two users whose streams are seeded alike.
	db := stdlib.OpenDB(*pgtest.ConnConfig(t, l, node, "client"))
	defer db.Close()
	typ := w.Transactions()[0]
	for user := 0; user < 2; user++ {
		sc, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stmt, err := sc.PrepareContext(ctx, typ.Statements[0].SQL)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		start = time.Now()
		for i := 0; i < 100; i++ {
			tx, err := sc.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			n, err := typ.Run(ctx, workload.NewTx(user, tx, map[string]*sql.Stmt{typ.Statements[0].Name: stmt}), r)
			if err != nil {
				tx.Rollback()
				t.Fatalf("user %d, insert #%d: %v", user, i, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("user %d, insert #%d: %d rows changed, want 1", user, i, n)
			}
		}
		t.Logf("user %d: 100 inserts in %s", user, time.Since(start).Round(time.Millisecond))
		sc.Close()
	}
	if n, _, _ := count(); n != 200200 {
		t.Errorf("kv: %d rows after 200 inserts, want 200200", n)
	}
}

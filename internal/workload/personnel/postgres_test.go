package personnel

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

const personnelSpec = `
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
kind = "personnel"
persons = 20000
text_bytes = 500
read_pct = 50
[run]
seed = 11
`

func TestPostgresLoadAndTransactions(t *testing.T) {
	t.Parallel()
	l, c := pgtest.Up(t, "wper", personnelSpec)
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

	// Load from the primary's own site, through COPY.
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
	t.Logf("loaded %d rows (%d persons) in %s: %.0f rows/s", last, w.persons, took.Round(time.Millisecond), float64(last)/took.Seconds())
	if last != w.TotalRows() {
		t.Errorf("last progress %d, TotalRows %d", last, w.TotalRows())
	}
	for name, want := range w.TableRows() {
		var got int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %d rows, want %d", name, got, want)
		}
	}
	var short, long int
	if err := conn.QueryRow(ctx, "SELECT min(length(per_dscrptn_text)), max(length(per_dscrptn_text)) FROM per").Scan(&short, &long); err != nil {
		t.Fatal(err)
	}
	if short != 500 || long != 500 {
		t.Errorf("descriptions of %d..%d characters, want 500", short, long)
	}

	// Each transaction type 100 times, from the client site, with the
	// statements prepared once on one connection as the driver does.
	db := stdlib.OpenDB(*pgtest.ConnConfig(t, l, node, "client"))
	defer db.Close()
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
		seed := uint64(len(typ.Name))
		r := rand.New(rand.NewPCG(seed, 1))
		start := time.Now()
		for i := 0; i < 100; i++ {
			tx, err := sc.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			n, err := typ.Run(ctx, workload.NewTx(0, tx, stmts), r)
			if err != nil {
				tx.Rollback()
				t.Fatalf("%s #%d: %v", typ.Name, i, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if want := map[string]int64{"update": 1, "lookup": 0}[typ.Name]; n != want {
				t.Errorf("%s #%d: %d rows changed, want %d", typ.Name, i, n, want)
			}
		}
		t.Logf("%s: 100 transactions in %s", typ.Name, time.Since(start).Round(time.Millisecond))
		if typ.Name != "update" {
			continue
		}
		// Replay the stream: each person updated holds its last new text.
		r = rand.New(rand.NewPCG(seed, 1))
		final := map[int64]string{}
		for i := 0; i < 100; i++ {
			id := w.person(r)
			final[id] = Text(r, w.textBytes)
		}
		for id, want := range final {
			var got string
			if err := conn.QueryRow(ctx, "SELECT per_dscrptn_text FROM per WHERE per_id = $1", id).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("per %d: description %.20q…, want the update's %.20q…", id, got, want)
			}
		}
	}
}

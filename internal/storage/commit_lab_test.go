package storage_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine/postgres/pgtest"
)

// TestCommitCostOnSAN measures PostgreSQL commits on a san with and
// without the journal and a delay, for docs/storage.md. It takes about
// 40 s, so it runs only when REPLAB_STORAGE_COSTS=1.
func TestCommitCostOnSAN(t *testing.T) {
	if os.Getenv("REPLAB_STORAGE_COSTS") != "1" {
		t.Skip("a measurement for docs/storage.md: set REPLAB_STORAGE_COSTS=1")
	}
	for _, cfg := range []string{`delay = "5ms"`, `delay = "5ms"` + "\njournal = false", `journal = true`, `journal = false`} {
		spec := strings.Replace(`
[lab]
name = "NAME"
[site.db]
[site.store]
[[link]]
sites = ["db", "store"]
[storage.san]
kind = "san"
site = "store"
size = "256MiB"
CFG
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
storage = "san"
`, "CFG", cfg, 1)
		t.Run(strings.ReplaceAll(cfg, "\n", ", "), func(t *testing.T) {
			l, c := pgtest.Up(t, "pgcost", spec)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			conn, err := pgx.ConnectConfig(ctx, pgtest.ConnConfig(t, l, c.Nodes()[0], "db"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"); err != nil {
				t.Fatal(err)
			}
			const n = 200
			start := time.Now()
			for i := range n { // synchronous_commit = on: a WAL flush each
				if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1, repeat('x', 500))", i); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: %.2f ms per commit", strings.ReplaceAll(cfg, "\n", ", "), float64(time.Since(start).Microseconds())/1000/n)
		})
	}
}

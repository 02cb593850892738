package pgtest

import (
	"context"
	"testing"
	"time"

	"replab/internal/engine"
)

const twoSites = `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "1ms"
`

func TestPostgresClusterAnswersFromTheOtherSite(t *testing.T) {
	_, c := Up(t, "tltpg", twoSites+`
[engine]
kind = "postgres"
[node.p1]
site = "a"
role = "primary"
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := c.(engine.SQL).Open(ctx, "p1", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1: %d, %v", one, err)
	}
}

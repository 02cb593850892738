package driver

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"testing"
	"time"

	"replab/internal/workload"
)

// TestGroupsRunTheirOwnTypesAtTheirOwnPlaces: three users in two groups;
// the first group runs only "put", the other only "get", which its
// Place sends elsewhere; each group is measured on its own.
func TestGroupsRunTheirOwnTypesAtTheirOwnPlaces(t *testing.T) {
	db, c := fakeDB(t, "")
	put := upsertTx()
	get := upsertTx()
	get.Name, get.ReadOnly = "get", true
	get.Statements = []workload.Statement{{Name: "get", SQL: "SELECT v FROM kv WHERE k = $1"}}
	get.Run = func(ctx context.Context, tx *workload.Tx, _ *rand.Rand) (int64, error) {
		var v int64
		if err := tx.QueryRow(ctx, "get", int64(1)).Scan(&v); err != nil && err != sql.ErrNoRows {
			return 0, err
		}
		return 0, nil
	}
	places := map[string]int{}
	targets := func(user, tries int, at string) (*sql.DB, error) {
		places[at]++
		return db, nil
	}
	group := func(u int) string {
		if u == 0 {
			return "writers"
		}
		return "readers"
	}
	cfg := withEngine(c, Config{Users: 3, Duration: 300 * time.Millisecond, Seed: 1, Group: group,
		Runs:  func(u int, t *workload.TxType) bool { return t.ReadOnly == (u != 0) },
		Place: func(u int, t *workload.TxType) string { return "site:" + group(u) }})
	res, err := Run(context.Background(), cfg, []workload.TxType{put, get}, targets)
	if err != nil {
		t.Fatal(err)
	}
	w, r := res.Groups["writers"], res.Groups["readers"]
	if w == nil || r == nil || w.Users != 1 || r.Users != 2 {
		t.Fatalf("groups %+v", res.Groups)
	}
	if _, ok := w.Types["get"]; ok || w.Transactions == 0 || w.Types["put"].Count != w.Transactions {
		t.Errorf("writers: %+v", w)
	}
	if _, ok := r.Types["put"]; ok || r.Transactions == 0 || r.Types["get"].Count != r.Transactions {
		t.Errorf("readers: %+v", r)
	}
	if w.Transactions+r.Transactions != res.Transactions {
		t.Errorf("groups %d + %d, run %d", w.Transactions, r.Transactions, res.Transactions)
	}
	if places["site:writers"] != 1 || places["site:readers"] != 2 || len(places) != 2 {
		t.Errorf("connections by place: %v", places)
	}
}

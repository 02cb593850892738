package postgres

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"replab/internal/engine"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestCountLines(t *testing.T) {
	dir := t.TempDir()
	log := `2026-11-23 19:20:01.001 UTC [123] WARNING:  CONFLICT: remote UPDATE on relation public.person (local index person_pkey). Resolution: apply_remote.
2026-11-23 19:20:01.002 UTC [123] CONTEXT:  apply UPDATE from remote relation public.person in commit before 0/3000A28, xid 761 committed at 2026-11-23 19:20:01.000 UTC (action #2) from node replorigin 1
2026-11-23 19:20:02.500 UTC [124] WARNING:  CONFLICT: remote DELETE on relation public.person replica identity index person_pkey (tuple not found). Resolution: skip.
2026-11-23 19:20:03.000 UTC [99] LOG:  database system is ready to accept connections
`
	path := filepath.Join(dir, "pg-m1.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want int64
	}{
		{path, 2},
		{filepath.Join(dir, "none.log"), 0},
	} {
		got, err := countLines(c.path, pglogicalConflict)
		if err != nil || got != c.want {
			t.Errorf("countLines(%s) = %d, %v; want %d", filepath.Base(c.path), got, err, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want engine.ErrorClass
	}{
		{&pgconn.PgError{Code: "40001"}, engine.ErrorClass{Code: "40001", Retry: true, Conflict: true}},
		{&pgconn.PgError{Code: "40P01"}, engine.ErrorClass{Code: "40P01", Retry: true, Conflict: true}},
		{&pgconn.PgError{Code: "57P03"}, engine.ErrorClass{Code: "57P03", Unavailable: true}},
		{fmt.Errorf("commit: %w", &pgconn.PgError{Code: "25006"}), engine.ErrorClass{Code: "25006", Unavailable: true}},
		{&pgconn.PgError{Code: "23505"}, engine.ErrorClass{Code: "23505"}},
		{errors.New("io: read/write on closed pipe"), engine.ErrorClass{}},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %+v, want %+v", c.err, got, c.want)
		}
	}
}

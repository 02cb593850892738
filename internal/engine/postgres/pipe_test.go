package postgres

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
)

const pipeSpec = `
[lab]
name = "NAME"
[site.db]
[site.client]
[[link]]
sites = ["db", "client"]
delay = "1ms"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
`

// TestPipe runs pipelined transactions against a real server: what
// commits, what a failing statement leaves (nothing, and a usable
// connection), arguments of several types, and cancellation while the
// server holds the reply back.
func TestPipe(t *testing.T) {
	t.Parallel()
	_, c := physLab(t, "tpipe", pipeSpec)
	ctx := ctxFor(t, 3*time.Minute)
	if err := sqlOn(t, ctx, c, "p1", "CREATE TABLE pt (id int PRIMARY KEY, n bigint NOT NULL, s text, v varchar(20), f float8, b bytea, at timestamptz)"); err != nil {
		t.Fatal(err)
	}
	if err := sqlOn(t, ctx, c, "p1", "INSERT INTO pt (id, n) SELECT g, 0 FROM generate_series(1, 10) g"); err != nil {
		t.Fatal(err)
	}
	db, err := c.Open(ctx, "p1", "client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	procs := runtime.GOMAXPROCS(0)
	p, err := c.Pipe(ctx, db, []string{
		"UPDATE pt SET n = n + 1 WHERE id = $1",
		"INSERT INTO pt (id, n) VALUES ($1, $2)",
		"UPDATE pt SET s = $2, v = $3, f = $4, b = $5, at = $6 WHERE id = $1",
		"UPDATE pt SET n = n + 1 WHERE id = $1 AND pg_sleep($2) IS NOT NULL",
		"LOCK TABLE pt IN ROW EXCLUSIVE MODE",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := runtime.GOMAXPROCS(0); got != procs+1 {
		t.Errorf("GOMAXPROCS %d with one pipe open, want %d", got, procs+1)
	}
	n := func(id int) int64 {
		t.Helper()
		var v int64
		if err := db.QueryRowContext(ctx, "SELECT n FROM pt WHERE id = $1", id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	run := func(calls ...engine.PipeCall) ([]int64, bool, error) {
		rows := make([]int64, len(calls))
		sent := false
		err := p.Run(ctx, calls, func() { sent = true }, rows)
		return rows, sent, err
	}

	t.Run("a transaction commits, each statement's rows affected come back", func(t *testing.T) {
		rows, sent, err := run(engine.PipeCall{Stmt: 0, Args: []any{1}}, engine.PipeCall{Stmt: 0, Args: []any{int64(99)}}, engine.PipeCall{Stmt: 1, Args: []any{11, int64(5)}})
		if err != nil || !sent {
			t.Fatalf("err %v, sent %v", err, sent)
		}
		if rows[0] != 1 || rows[1] != 0 || rows[2] != 1 {
			t.Errorf("rows %v, want [1 0 1]", rows)
		}
		if n(1) != 1 || n(11) != 5 {
			t.Errorf("n(1) = %d, n(11) = %d after commit, want 1 and 5", n(1), n(11))
		}
	})

	t.Run("a failing statement mid-pipeline: its SQLSTATE, nothing committed, the pipe still works", func(t *testing.T) {
		before := n(2)
		_, sent, err := run(engine.PipeCall{Stmt: 0, Args: []any{2}}, engine.PipeCall{Stmt: 1, Args: []any{1, 0}}, engine.PipeCall{Stmt: 0, Args: []any{3}})
		if err == nil || !sent {
			t.Fatalf("err %v, sent %v: want a duplicate key", err, sent)
		}
		if cl := engine.Classify(c, err); cl.Code != "23505" || cl.Retry {
			t.Errorf("classified %+v (%v), want 23505, no retry", cl, err)
		}
		if n(2) != before {
			t.Errorf("n(2) = %d after a failed transaction, was %d", n(2), before)
		}
		if _, _, err := run(engine.PipeCall{Stmt: 0, Args: []any{2}}); err != nil {
			t.Fatalf("next transaction on the same pipe: %v", err)
		}
		if n(2) != before+1 {
			t.Errorf("n(2) = %d, want %d", n(2), before+1)
		}
	})

	t.Run("a statement that needs a transaction block runs in BEGIN … COMMIT", func(t *testing.T) {
		// Plain DML leaves as an implicit transaction (the case above:
		// atomic all the same); LOCK outside a block is an error (25P01).
		before := n(8)
		if _, _, err := run(engine.PipeCall{Stmt: 4}, engine.PipeCall{Stmt: 0, Args: []any{8}}); err != nil {
			t.Fatalf("LOCK, UPDATE: %v", err)
		}
		if n(8) != before+1 {
			t.Errorf("n(8) = %d, want %d", n(8), before+1)
		}
	})

	t.Run("arguments of other types go through pgx's type map", func(t *testing.T) {
		at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		rows, _, err := run(engine.PipeCall{Stmt: 2, Args: []any{4, "it's \\ text", "varchar", 2.5, []byte{0, 1, 255}, at}})
		if err != nil || rows[0] != 1 {
			t.Fatalf("rows %v, err %v", rows, err)
		}
		var s, v string
		var f float64
		var b []byte
		var got time.Time
		if err := db.QueryRowContext(ctx, "SELECT s, v, f, b, at FROM pt WHERE id = 4").Scan(&s, &v, &f, &b, &got); err != nil {
			t.Fatal(err)
		}
		if s != "it's \\ text" || v != "varchar" || f != 2.5 || string(b) != "\x00\x01\xff" || !got.Equal(at) {
			t.Errorf("read back %q %q %v %v %v", s, v, f, b, got)
		}
		if _, _, err := run(engine.PipeCall{Stmt: 2, Args: []any{4}}); err == nil {
			t.Error("too few arguments accepted")
		}
		if _, _, err := run(engine.PipeCall{Stmt: 9, Args: nil}); err == nil {
			t.Error("no statement 9, yet no error")
		}
	})

	t.Run("pointers (a workload's scratch) are sent as what they point to, nil ones as NULL", func(t *testing.T) {
		id, text, bin := int64(5), []byte("from a scratch"), []byte{2, 0, 254}
		rows, _, err := run(engine.PipeCall{Stmt: 2, Args: []any{&id, &text, (*[]byte)(nil), (*int64)(nil), &bin, nil}})
		if err != nil || rows[0] != 1 {
			t.Fatalf("rows %v, err %v", rows, err)
		}
		var s string
		var v, f, at any
		var b []byte
		if err := db.QueryRowContext(ctx, "SELECT s, v, f, b, at FROM pt WHERE id = 5").Scan(&s, &v, &f, &b, &at); err != nil {
			t.Fatal(err)
		}
		if s != "from a scratch" || v != nil || f != nil || string(b) != "\x02\x00\xfe" || at != nil {
			t.Errorf("read back %q %v %v %q %v", s, v, f, b, at)
		}
	})

	t.Run("autocommit: each statement its own transaction, a failure undoes only itself", func(t *testing.T) {
		ap, ok := p.(engine.AutocommitPipe)
		if !ok {
			t.Fatal("the pipe cannot run without a transaction")
		}
		b6, b7 := n(6), n(7)
		rows := make([]int64, 3)
		err := ap.RunAutocommit(ctx, []engine.PipeCall{{Stmt: 0, Args: []any{6}}, {Stmt: 1, Args: []any{1, 0}}, {Stmt: 0, Args: []any{7}}}, nil, rows)
		if cl := engine.Classify(c, err); cl.Code != "23505" || !strings.Contains(err.Error(), "statement 2 of 3") {
			t.Fatalf("err %v (%+v), want the second statement's duplicate key", err, cl)
		}
		if n(6) != b6+1 || n(7) != b7+1 || rows[0] != 1 || rows[2] != 1 {
			t.Errorf("n(6) %d→%d, n(7) %d→%d, rows %v: the statements before and after the failing one commit", b6, n(6), b7, n(7), rows)
		}
		var inTx bool
		if err := db.QueryRowContext(ctx, "SELECT count(*) > 0 FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'").Scan(&inTx); err != nil || inTx {
			t.Errorf("a session left in a transaction: %v %v", inTx, err)
		}
		if _, _, err := run(engine.PipeCall{Stmt: 0, Args: []any{6}}); err != nil || n(6) != b6+2 {
			t.Fatalf("a transaction after autocommit statements: %v, n(6) %d", err, n(6))
		}
	})

	t.Run("cancellation while the reply is due: Run returns, the pipe is closed", func(t *testing.T) {
		// The server sleeps 20 s in the UPDATE; the run is cancelled after
		// 300 ms. (The whole transaction was sent: the server may still
		// commit it when the sleep ends, as with pgx before.)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		err := p.Run(cctx, []engine.PipeCall{{Stmt: 3, Args: []any{5, 20}}}, nil, make([]int64, 1))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("Run returned %s after it started, the server's answer was 20 s away", el)
		}
		if err := p.Run(ctx, []engine.PipeCall{{Stmt: 0, Args: []any{1}}}, nil, make([]int64, 1)); err == nil {
			t.Error("a cancelled pipe ran another transaction")
		}
	})

	t.Run("closing gives the P back", func(t *testing.T) {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Errorf("GOMAXPROCS %d after the pipe closed, want %d", got, procs)
		}
	})

	t.Run("the pool lost the taken connection and still serves", func(t *testing.T) {
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Errorf("pool after Pipe: %v", err)
		}
	})
}

package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/fake"
	"replab/internal/lab"
	"replab/internal/spec"
	"replab/internal/workload"
)

// The driver against the fake engine, in this process: no root needed.

// fakeDB brings up one fake primary (with the given [scheme] lines) and a
// table kv; it returns a pool and the cluster.
func fakeDB(t *testing.T, scheme string) (*sql.DB, engine.Cluster) {
	t.Helper()
	dbs, c := fakeNodes(t, `[node.p]
site = "a"
role = "primary"
[scheme]
`+scheme, "p")
	return dbs[0], c
}

// fakeNodes brings up the fake with the given [node.*] and [scheme]
// tables and a table kv; it returns a pool per named node.
func fakeNodes(t *testing.T, nodes string, names ...string) ([]*sql.DB, engine.Cluster) {
	t.Helper()
	s, err := spec.Parse("drv.toml", []byte(`[lab]
name = "drv"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "fake"
`+nodes+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := lab.Up(ctx, s, lab.Options{Offline: true, StateRoot: t.TempDir(), DataRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := fake.Engine{}.Up(ctx, l, discard{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sc := c.(engine.SQL)
	if err := sc.ApplySchema(ctx, engine.Schema{Tables: []engine.Table{{Name: "kv", Create: map[engine.Dialect]string{
		"postgres": "CREATE TABLE kv (k bigint PRIMARY KEY, v bigint NOT NULL)"}}}}); err != nil {
		t.Fatal(err)
	}
	var dbs []*sql.DB
	for _, name := range names {
		db, err := sc.Open(ctx, name, "a")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	return dbs, c
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// upsertTx writes a random key: every attempt changes one row.
func upsertTx() workload.TxType {
	return workload.TxType{Name: "put", Weight: 1,
		Statements: []workload.Statement{{Name: "put", SQL: "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"}},
		Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
			res, err := tx.Exec(ctx, "put", r.Int64N(1000), int64(tx.User))
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		}}
}

func TestFakeRetriesConflictsAndCountsThem(t *testing.T) {
	// One user: every 4th commit conflicts and its retry is the next one,
	// which does not (with two users the commits interleave, and a retry
	// could be a 4th again).
	db, c := fakeDB(t, "conflict_every = 4")
	res, err := Run(context.Background(), withEngine(c, Config{Users: 1, Duration: time.Second, Seed: 3, MaxRetries: 3}), []workload.TxType{upsertTx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Errors != 0 || res.Retries == 0 || res.Conflicts != res.Retries {
		t.Errorf("complete %v, errors %d, retries %d, conflicts %d: every conflict retried, none failed", res.Complete, res.Errors, res.Retries, res.Conflicts)
	}
	if tr := res.Types["put"]; tr.Conflicts != res.Conflicts || tr.Retries != res.Retries {
		t.Errorf("type put: %d conflicts, %d retries", tr.Conflicts, tr.Retries)
	}
}

func TestFakeWithoutRetriesConflictsAreErrorsByCode(t *testing.T) {
	db, c := fakeDB(t, "conflict_every = 4")
	res, err := Run(context.Background(), withEngine(c, Config{Users: 1, Duration: time.Second, Seed: 3, MaxRetries: 0}), []workload.TxType{upsertTx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Types["put"].Errors["40001"]; n == 0 || n != res.Errors || res.Conflicts != res.Errors || res.Retries != 0 {
		t.Errorf("errors %v (total %d), conflicts %d, retries %d", res.Types["put"].Errors, res.Errors, res.Conflicts, res.Retries)
	}
}

// TestFakeOpenLoopCountsSkippedTransactions: a node paused for 600 ms in
// the middle of an open-loop run at 200/s. The transactions scheduled
// meanwhile that found every connection busy were skipped; each still
// counts in the latency, from its intended start to when the driver could
// next send, so the stall shows in the tail as the transactions it held
// back.
func TestFakeOpenLoopCountsSkippedTransactions(t *testing.T) {
	db, c := fakeDB(t, "")
	pauser := c.(engine.Pauser)
	// The pause starts at the driver's first progress tick (1 s into the
	// run, by its own clock), so a late goroutine cannot push it past the
	// run's end.
	var once sync.Once
	cfg := withEngine(c, Config{Users: 2, Duration: 2500 * time.Millisecond, RatePerSec: 200, Seed: 5})
	cfg.Progress = func(Progress) {
		once.Do(func() {
			_ = pauser.Pause(context.Background(), "p")
			time.AfterFunc(600*time.Millisecond, func() { _ = pauser.Resume(context.Background(), "p") })
		})
	}
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commits, %d skipped; latency p50 %.1f p90 %.1f max %.1f ms; skipped p50 %.1f max %.1f ms; commits alone p90 %.1f ms",
		res.Transactions, res.Skipped, res.CommitLatency.P50, res.CommitLatency.P90, res.CommitLatency.Max,
		res.SkippedLatencyMs.P50, res.SkippedLatencyMs.Max, res.Types["put"].LatencyMs.P90)
	if res.Skipped == 0 {
		t.Fatal("nothing skipped during a 600 ms pause at 200/s with 2 connections")
	}
	// Every intended transaction of the measure phase counts once.
	if res.CommitLatency.Count != res.Transactions+res.Skipped || res.SkippedLatencyMs.Count != res.Skipped {
		t.Errorf("latency count %d, skipped latencies %d; want %d commits + %d skipped", res.CommitLatency.Count, res.SkippedLatencyMs.Count, res.Transactions, res.Skipped)
	}
	// The first transaction caught by the pause waited all of it; about a
	// quarter of the 2.5 s run's schedule fell in it, and each of those
	// waited on average half of it, so the stall reaches the 90th
	// percentile.
	if res.CommitLatency.Max < 500 || res.CommitLatency.P90 < 100 {
		t.Errorf("latency max %.1f ms, p90 %.1f ms after a 600 ms pause: want max ≥ 500 and p90 ≥ 100", res.CommitLatency.Max, res.CommitLatency.P90)
	}
	if !strings.Contains(res.Mode, "open") {
		t.Errorf("mode %s", res.Mode)
	}
}

// refusing is a Pipeliner whose connections cannot pipeline.
type refusing struct{}

func (refusing) Pipe(context.Context, *sql.DB, []string) (engine.Pipe, error) {
	return nil, engine.ErrNoPipeline
}

func TestFakeRefusedPipelineRunsStatementByStatement(t *testing.T) {
	db, c := fakeDB(t, "")
	tx := upsertTx()
	tx.Batch = func(int, *rand.Rand, *workload.Scratch) []workload.Call {
		t.Error("Batch called on a connection that cannot pipeline")
		return nil
	}
	cfg := withEngine(c, Config{Users: 2, Duration: 500 * time.Millisecond, Seed: 6})
	cfg.Pipeliner = refusing{}
	res, err := Run(context.Background(), cfg, []workload.TxType{tx}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Transactions == 0 || res.Errors != 0 {
		t.Errorf("complete %v, %d commits, %d errors", res.Complete, res.Transactions, res.Errors)
	}
}

// countingPipe pipelines nothing: it counts the transactions sent.
type countingPipe struct{ runs *int64 }

func (p countingPipe) Pipe(context.Context, *sql.DB, []string) (engine.Pipe, error) { return p, nil }
func (p countingPipe) Run(_ context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64) error {
	beforeSend()
	*p.runs++
	for i := range rows {
		rows[i] = 1
	}
	return nil
}
func (p countingPipe) Close() error { return nil }

// TestBatchErrFailsBeforeSending: a Call with Err (a script's division by
// zero) is an error of its type, and nothing of that transaction is sent.
func TestBatchErrFailsBeforeSending(t *testing.T) {
	db, c := fakeDB(t, "")
	tx := upsertTx()
	n := 0
	tx.Batch = func(_ int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
		n++
		if n%10 == 0 {
			return []workload.Call{{Err: errors.New("division by zero")}}
		}
		return []workload.Call{{Stmt: "put", Args: []any{r.Int64N(1000), int64(0)}, Rows: 1}}
	}
	var runs int64
	cfg := withEngine(c, Config{Users: 1, Duration: 300 * time.Millisecond, Seed: 6})
	cfg.Pipeliner = countingPipe{runs: &runs}
	res, err := Run(context.Background(), cfg, []workload.TxType{tx}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Types["put"]
	if tr == nil || tr.Errors["other"] == 0 || runs != int64(n)-int64(n/10) {
		t.Errorf("%d batches, %d sent, type %+v", n, runs, tr)
	}
}

// TestAutocommitReadOnlyRunsOutsideATransaction: a read-only Autocommit
// type runs its statements on the connection (no BEGIN, no pipeline), so
// Batch is never called even with a Pipeliner.
func TestAutocommitReadOnlyRunsOutsideATransaction(t *testing.T) {
	db, c := fakeDB(t, "")
	get := workload.TxType{Name: "get", Weight: 1, ReadOnly: true, Autocommit: true,
		Statements: []workload.Statement{{Name: "get", SQL: "SELECT v FROM kv WHERE k = $1"}},
		Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
			rows, err := tx.Query(ctx, "get", r.Int64N(1000))
			if err != nil {
				return 0, err
			}
			return 0, rows.Close()
		},
		Batch: func(int, *rand.Rand, *workload.Scratch) []workload.Call {
			t.Error("Batch called for an Autocommit type")
			return nil
		}}
	var runs int64
	cfg := withEngine(c, Config{Users: 2, Duration: 300 * time.Millisecond, Seed: 6})
	cfg.Pipeliner = countingPipe{runs: &runs}
	res, err := Run(context.Background(), cfg, []workload.TxType{get}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Transactions == 0 || res.Errors != 0 || runs != 0 {
		t.Errorf("complete %v, %d commits, %d errors, %d pipelined", res.Complete, res.Transactions, res.Errors, runs)
	}
}

// An Op type needs no SQL connection: the driver calls it, times it and
// counts its errors like any transaction.
func TestOpTypesRunWithoutConnections(t *testing.T) {
	var calls sync.Map
	op := func(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
		n, _ := calls.LoadOrStore(call.User, new(int64))
		*n.(*int64)++
		if *n.(*int64)%5 == 0 {
			return 0, errors.New("page 5 is missing")
		}
		return 1, nil
	}
	types := []workload.TxType{{Name: "page", Weight: 1, ReadOnly: true, Op: op}}
	cfg := Config{Users: 3, Duration: 300 * time.Millisecond, ThinkMin: time.Millisecond, ThinkMax: time.Millisecond, MaxErrorPct: 100}
	res, err := Run(context.Background(), cfg, types, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Types["page"]
	if tr == nil || tr.Count == 0 {
		t.Fatalf("no page counted: %+v", res.Types)
	}
	if res.Errors == 0 || tr.Count < 3*res.Errors {
		t.Errorf("every fifth call failed, but the result counts %d pages and %d errors (%v)", tr.Count, res.Errors, tr.Errors)
	}
	for u := range 3 {
		if _, ok := calls.Load(u); !ok {
			t.Errorf("user %d never called the op", u)
		}
	}
	if _, err := Run(context.Background(), cfg, []workload.TxType{{Name: "sql", Weight: 1}}, nil); err == nil {
		t.Error("an SQL type without connections was accepted")
	}
}

// A writing Op type carries the lag stamp of every tracked call: the
// journal sees each seq sent once and done with the call's outcome, in
// order, and a read-only Op carries none.
func TestOpTypesCarryLagStamps(t *testing.T) {
	type seen struct{ seqs []int64 }
	var mu sync.Mutex
	got := map[int]*seen{}
	write := func(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
		if call.Seq == 0 || call.Sending == nil {
			return 0, fmt.Errorf("user %d: untracked call (seq %d) with LagEvery 1", call.User, call.Seq)
		}
		call.Sending()
		mu.Lock()
		s := got[call.User]
		if s == nil {
			s = &seen{}
			got[call.User] = s
		}
		s.seqs = append(s.seqs, call.Seq)
		mu.Unlock()
		return 1, nil
	}
	read := func(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
		if call.Seq != 0 || call.Sending != nil {
			return 0, errors.New("a read-only call was given a lag stamp")
		}
		return 1, nil
	}
	types := []workload.TxType{{Name: "put", Weight: 1, Op: write}, {Name: "get", Weight: 1, ReadOnly: true, Op: read}}
	js := []*countJournal{{}, {}}
	cfg := Config{Users: 2, Duration: 300 * time.Millisecond, ThinkMin: time.Millisecond, ThinkMax: time.Millisecond, MaxErrorPct: 0, LagEvery: 1,
		Lag: func(i int) LagJournal { return js[i] }}
	res, err := Run(context.Background(), cfg, types, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("%d errors: %+v", res.Errors, res.Types)
	}
	for u := range 2 {
		s := got[u]
		if s == nil || len(s.seqs) == 0 {
			t.Fatalf("user %d put nothing", u)
		}
		for i, q := range s.seqs {
			if q != int64(i+1) {
				t.Fatalf("user %d: put %d carried seq %d, want %d (seqs %v)", u, i, q, i+1, s.seqs)
			}
		}
		if sent := js[u].measured + js[u].other; sent != int64(len(s.seqs)) {
			t.Errorf("user %d: %d stamps sent, %d puts", u, sent, len(s.seqs))
		}
		if js[u].seq != int64(len(s.seqs)) {
			t.Errorf("user %d: the journal gave %d seqs for %d puts", u, js[u].seq, len(s.seqs))
		}
	}
}

// With a count, the measure phase holds exactly that many transactions
// (committed or failed) and ends when the last finishes; the cooldown
// follows. A duration that comes first ends it instead.
func TestTransactionsEndTheMeasurePhase(t *testing.T) {
	var n atomic.Int64
	op := func(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
		if n.Add(1)%7 == 0 {
			return 0, errors.New("every seventh fails")
		}
		return 1, nil
	}
	types := []workload.TxType{{Name: "op", Weight: 1, Op: op}}
	var ended []time.Time
	cfg := Config{Users: 3, Warmup: 100 * time.Millisecond, Duration: time.Hour, Cooldown: 200 * time.Millisecond,
		Transactions: 500, MaxErrorPct: 100, MeasureEnded: func(at time.Time) { ended = append(ended, at) }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg, types, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete {
		t.Fatalf("not complete (%s): the count did not end the hour-long measure phase", res.StopReason)
	}
	if got := res.Transactions + res.Errors; got != 500 || res.TransactionsDone != 500 || res.TransactionsTarget != 500 {
		t.Errorf("measure phase: %d committed + %d failed, done %d of %d; want exactly 500", res.Transactions, res.Errors, res.TransactionsDone, res.TransactionsTarget)
	}
	if res.Errors == 0 {
		t.Error("no failed transaction counted")
	}
	if len(ended) != 1 || res.MeasureSeconds <= 0 || res.MeasureSeconds >= 60 {
		t.Errorf("MeasureEnded called %d times, measure phase %.3f s", len(ended), res.MeasureSeconds)
	}
	if want := float64(res.Transactions) / res.MeasureSeconds; math.Abs(res.TPS-want) > 1e-9*want {
		t.Errorf("tps %.1f, want committed / measure seconds = %.1f", res.TPS, want)
	}
	if total := n.Load(); total <= 500 {
		t.Errorf("%d calls in all: the warmup and cooldown ran none", total)
	}

	// The duration first: fewer done than the count.
	cfg.Duration, cfg.Transactions, cfg.Cooldown = 200*time.Millisecond, 1e12, 0
	ended = nil
	res, err = Run(ctx, cfg, types, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TransactionsDone >= res.TransactionsTarget || res.MeasureSeconds != 0.2 || len(ended) != 0 {
		t.Errorf("done %d of %d in %.3f s, MeasureEnded called %d times; want the duration to end it", res.TransactionsDone, res.TransactionsTarget, res.MeasureSeconds, len(ended))
	}
	if _, err := Run(ctx, Config{Users: 1, Duration: time.Second, RatePerSec: 10, Transactions: 5}, types, nil); err == nil {
		t.Error("a count with a rate was accepted")
	}
}

// TestSessionStatementsRunOncePerConnection: a type's Session statements
// run when a user connects, once for the types sharing the connection,
// and again when it reconnects. One user: with two, the other could take
// every counted transaction while the first waits for the node's restart,
// and the first would never reconnect in the measure phase.
func TestSessionStatementsRunOncePerConnection(t *testing.T) {
	db, c := fakeDB(t, "")
	count := "INSERT INTO kv (k, v) VALUES (-1, 1) ON CONFLICT (k) DO UPDATE SET v = v + 1"
	a, b := upsertTx(), upsertTx()
	b.Name = "put2"
	a.Session, b.Session = []string{count}, []string{count}
	var killed atomic.Bool
	run := a.Run
	a.Run = func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
		if !killed.Swap(true) {
			// One connection lost: the user makes a new one.
			_ = c.(engine.NodeControl).Restart(ctx, "p")
			return 0, &net.OpError{Op: "read", Net: "fake", Err: errors.New("connection reset")}
		}
		return run(ctx, tx, r)
	}
	cfg := withEngine(c, Config{Users: 1, Duration: time.Hour, Transactions: 30, Seed: 1})
	res, err := Run(context.Background(), cfg, []workload.TxType{a, b}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.QueryRow("SELECT v FROM kv WHERE k = -1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 || res.Reconnects != 1 {
		t.Errorf("session statement ran %d times with %d reconnections; want 2: the user's connection (shared by both types) and one reconnection", n, res.Reconnects)
	}
}

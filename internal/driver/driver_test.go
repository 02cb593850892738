package driver

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"replab/internal/engine/postgres/pgtest"

	"replab/internal/engine"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
)

const drvSpec = `
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
[workload]
kind = "kv-insert"
`

// drvCluster brings up one PostgreSQL primary in a two-site lab and the
// kv-insert workload's table; it returns a pool dialled from the client
// site and the cluster.
func drvCluster(t *testing.T) (*sql.DB, engine.Cluster, workload.Workload) {
	t.Helper()
	l, c := pgtest.Up(t, "tdrv", drvSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := workload.NewRegistry(kvinsert.Factory).For(l.Spec, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(engine.SQL).ApplySchema(ctx, w.Schema()); err != nil {
		t.Fatal(err)
	}
	db, err := c.(engine.SQL).Open(ctx, "p1", "client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, c, w
}

// withEngine completes cfg with the cluster's error classes and
// pipelining, as replab run does.
func withEngine(c engine.Cluster, cfg Config) Config {
	cfg.Classify = func(err error) engine.ErrorClass { return engine.Classify(c, err) }
	cfg.Pipeliner, _ = c.(engine.Pipeliner)
	return cfg
}

func count(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow("SELECT count(*) FROM kv").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// signalBackends sends sig to every server process but the postmaster.
func signalBackends(t *testing.T, c engine.Cluster, sig syscall.Signal) {
	t.Helper()
	procs, err := c.Processes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Role != "postmaster" {
			_ = syscall.Kill(p.PID, sig)
		}
	}
}

func TestDriverAgainstPostgres(t *testing.T) {
	db, c, w := drvCluster(t)

	t.Run("closed loop: committed transactions equal rows changed and rows in the table", func(t *testing.T) {
		before := count(t, db)
		res, err := Run(context.Background(), withEngine(c, Config{Users: 3, Duration: 2 * time.Second, Seed: 7, MaxRetries: 3}), w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Complete || res.Transactions == 0 || res.Errors != 0 {
			t.Fatalf("result %+v", res)
		}
		if res.RowsChanged != res.Transactions {
			t.Errorf("rows changed %d != transactions %d", res.RowsChanged, res.Transactions)
		}
		// Without warmup or cooldown, every commit was measured.
		if got := count(t, db) - before; got != res.Transactions {
			t.Errorf("table grew by %d rows, driver counted %d commits", got, res.Transactions)
		}
		if res.Types["insert"].Count != res.Transactions || res.CommitLatency.Count != res.Transactions {
			t.Errorf("per-type %d and histogram %d counts differ from %d", res.Types["insert"].Count, res.CommitLatency.Count, res.Transactions)
		}
		if res.TPM != float64(res.Transactions)/2*60 {
			t.Errorf("tpm %.1f for %d transactions in 2 s", res.TPM, res.Transactions)
		}
	})

	t.Run("statement by statement (no pipelining) the counts add up too", func(t *testing.T) {
		before := count(t, db)
		res, err := Run(context.Background(), withEngine(c, Config{Users: 2, Duration: time.Second, Seed: 12, NoPipeline: true}), w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if got := count(t, db) - before; res.Transactions == 0 || got != res.Transactions || res.RowsChanged != res.Transactions {
			t.Errorf("table grew by %d, driver counted %d commits and %d rows", got, res.Transactions, res.RowsChanged)
		}
	})

	t.Run("pipelined: a wrong row count is an error, a failing statement is counted by its SQLSTATE", func(t *testing.T) {
		if _, err := db.Exec("CREATE TABLE IF NOT EXISTS drv_pipe (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		batch := func(rows int64, q string) workload.TxType {
			return workload.TxType{Name: "t", Weight: 1, Statements: []workload.Statement{{Name: "s", SQL: q}},
				Run: func(context.Context, *workload.Tx, *rand.Rand) (int64, error) {
					t.Error("ran statement by statement: want pipelined")
					return 0, nil
				},
				Batch: func(_ int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
					return []workload.Call{{Stmt: "s", Args: []any{r.Int64N(1 << 40)}, Rows: rows}}
				}}
		}
		cfg := withEngine(c, Config{Users: 2, Duration: time.Second, Seed: 14})
		if cfg.Pipeliner == nil {
			t.Fatal("PostgreSQL has no Pipeliner")
		}
		res, err := Run(context.Background(), cfg, []workload.TxType{batch(1, "UPDATE drv_pipe SET id = id WHERE id = $1")}, Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if res.Transactions != 0 || res.Errors == 0 || res.Types["t"].Errors["other"] != res.Errors {
			t.Errorf("no row matches, yet %d commits; errors %v", res.Transactions, res.Types["t"].Errors)
		}
		res, err = Run(context.Background(), cfg, []workload.TxType{batch(1, "INSERT INTO drv_pipe VALUES ($1::bigint % 1)")}, Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if n := res.Types["t"].Errors["23505"]; n == 0 || n != res.Errors || res.Transactions != 1 {
			t.Errorf("inserting key 0 again and again: %d commits, errors %v; want 1 and the rest 23505", res.Transactions, res.Types["t"].Errors)
		}
	})

	t.Run("phases: warmup and cooldown are not measured", func(t *testing.T) {
		before := count(t, db)
		res, err := Run(context.Background(), withEngine(c, Config{Users: 2, Warmup: time.Second, Duration: time.Second, Cooldown: time.Second, Seed: 8}), w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		total := count(t, db) - before
		if res.Transactions == 0 || res.Transactions >= total {
			t.Errorf("measured %d of %d committed: want only the middle second's", res.Transactions, total)
		}
		phases := map[string]int{}
		for _, s := range res.Series {
			phases[s.Phase]++
		}
		if phases[Warmup] == 0 || phases[Measure] == 0 || phases[Cooldown] == 0 {
			t.Errorf("series phases %v", phases)
		}
	})

	t.Run("automatic lag sample: the warmup's first half tracked, then every Nth from its second half's rate", func(t *testing.T) {
		if _, err := db.Exec("CREATE TABLE IF NOT EXISTS drv_lag (writer int PRIMARY KEY, seq bigint NOT NULL); INSERT INTO drv_lag VALUES (0, 0), (1, 0) ON CONFLICT DO NOTHING"); err != nil {
			t.Fatal(err)
		}
		js := []*countJournal{{}, {}}
		before := count(t, db)
		cfg := Config{Users: 2, Warmup: time.Second, Duration: 2 * time.Second, Seed: 13, LagBudget: 20,
			Lag:          func(i int) LagJournal { return js[i] },
			LagStatement: "UPDATE drv_lag SET seq = $1 WHERE writer = $2"}
		res, err := Run(context.Background(), withEngine(c, cfg), w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Complete || res.Errors != 0 {
			t.Fatalf("result %+v", res)
		}
		var measured, other int64
		for _, j := range js {
			measured += j.measured
			other += j.other
		}
		n := int64(res.LagSampleEvery)
		t.Logf("%d warmup commits tracked; N = %d; %d of %d measured tracked", other, n, measured, res.Transactions)
		if !res.LagSampleAuto || res.LagBudgetPerS != 20 || n < 2 {
			t.Fatalf("sample every %d, auto %v, budget %v: want N ≥ 2 at a budget of 20/s", n, res.LagSampleAuto, res.LagBudgetPerS)
		}
		// The warmup's first half tracks every transaction, its second
		// half none (it measures the rate N comes from): some of the
		// warmup's transactions are tracked, not all. (How many depends on
		// how fast each half ran, which a busy machine changes.)
		if warm := count(t, db) - before - res.Transactions; other <= 0 || other >= warm {
			t.Errorf("%d warmup transactions tracked of %d: want the first half's, some but not all", other, warm)
		}
		if want := res.Transactions / n; measured < want-2 || measured > want+2 {
			t.Errorf("%d measured transactions tracked, want %d ± 2 (%d every %d)", measured, want, res.Transactions, n)
		}
	})

	t.Run("open loop: latency from the intended start shows a paused server", func(t *testing.T) {
		// The pause starts at the driver's first progress tick (1 s into
		// the run, by its own clock), so a late goroutine cannot push it
		// past the run's end.
		var once sync.Once
		cfg := withEngine(c, Config{Users: 4, Duration: 4 * time.Second, RatePerSec: 200, Poisson: false, Seed: 9})
		cfg.Progress = func(Progress) {
			once.Do(func() {
				signalBackends(t, c, syscall.SIGSTOP)
				time.AfterFunc(time.Second, func() { signalBackends(t, c, syscall.SIGCONT) })
			})
		}
		res, err := Run(context.Background(), cfg, w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("open loop: %d commits, latency p50 %.2f p99 %.2f max %.2f ms, behind max %.2f ms, skipped %d",
			res.Transactions, res.CommitLatency.P50, res.CommitLatency.P99, res.CommitLatency.Max, res.BehindScheduleMs.Max, res.Skipped)
		if res.Mode != "open" || res.BehindScheduleMs == nil {
			t.Fatalf("mode %s", res.Mode)
		}
		// Transactions scheduled during the 1 s pause waited for it: counted
		// from their intended start, the tail shows the whole stall.
		if res.CommitLatency.Max < 800 {
			t.Errorf("max latency %.1f ms after a 1 s pause, want ≥ 800 ms", res.CommitLatency.Max)
		}
		if res.Skipped == 0 && res.BehindScheduleMs.Max < 500 {
			t.Errorf("neither skipped transactions nor a schedule lag after a 1 s pause")
		}
		// 200/s for 4 s: the schedule is kept apart from the stall.
		if got := res.Transactions + res.Skipped; got < 700 || got > 900 {
			t.Errorf("%d committed + skipped, want ~800", got)
		}
	})

	t.Run("too many errors stop the run, marked incomplete, with the reason", func(t *testing.T) {
		// From 1.2 s on every transaction divides by zero. (Terminating
		// the users' backends no longer does: they reconnect.)
		var failing atomic.Bool
		time.AfterFunc(1200*time.Millisecond, func() { failing.Store(true) })
		div := workload.TxType{Name: "div", Weight: 1, Statements: []workload.Statement{{Name: "div", SQL: "SELECT 1 / $1::int"}},
			Run: func(ctx context.Context, tx *workload.Tx, _ *rand.Rand) (int64, error) {
				d := 1
				if failing.Load() {
					d = 0
				}
				rows, err := tx.Query(ctx, "div", d)
				if err != nil {
					return 0, err
				}
				for rows.Next() {
				}
				return 0, errors.Join(rows.Err(), rows.Close())
			}}
		res, err := Run(context.Background(), withEngine(c, Config{Users: 2, Duration: 10 * time.Second, MaxErrorPct: 20, Seed: 10}), []workload.TxType{div}, Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete || !strings.Contains(res.StopReason, "failed") {
			t.Errorf("complete=%v reason=%q: want stopped by the error threshold", res.Complete, res.StopReason)
		}
		if res.Errors == 0 || res.Types["div"].Errors["22012"] != res.Errors {
			t.Errorf("errors not counted by kind: %+v", res.Types["div"])
		}
	})

	t.Run("cancellation returns what was measured, marked interrupted", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		res, err := Run(ctx, withEngine(c, Config{Users: 2, Duration: 30 * time.Second, Seed: 11}), w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete || res.StopReason != "interrupted" || res.Transactions == 0 {
			t.Errorf("complete=%v reason=%q transactions=%d", res.Complete, res.StopReason, res.Transactions)
		}
	})

	// The last subtests break the server; the ones before need it whole.

	t.Run("backends killed: users reconnect and commit again", func(t *testing.T) {
		// SIGKILL to every backend: the postmaster reinitialises (crash
		// recovery) and every connection breaks.
		var once sync.Once
		cfg := withEngine(c, withLag(t, db, Config{Users: 4, Duration: 6 * time.Second, Seed: 15}))
		cfg.Progress = func(Progress) { once.Do(func() { signalBackends(t, c, syscall.SIGKILL) }) }
		res, err := Run(context.Background(), cfg, w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		errs := res.Types["insert"].Errors
		t.Logf("%d commits, errors %v, %d reconnects, series %+v", res.Transactions, errs, res.Reconnects, res.Series)
		if !res.Complete {
			t.Fatalf("incomplete: %s", res.StopReason)
		}
		if res.Errors == 0 || errs[ErrConnection]+errs[ErrConnect] == 0 {
			t.Errorf("errors %v: want the broken connections counted", errs)
		}
		if res.Reconnects < 4 {
			t.Errorf("%d reconnects of 4 users", res.Reconnects)
		}
		if last := lastSecond(res, cfg.Duration); last.Commits == 0 {
			t.Errorf("last second %+v: no commits after the server came back", last)
		}
	})

	t.Run("node killed for 2 s, statement by statement: users back off, then reconnect", func(t *testing.T) {
		nc := c.(engine.NodeControl)
		var once sync.Once
		cfg := withEngine(c, withLag(t, db, Config{Users: 4, Duration: 7 * time.Second, Seed: 16, NoPipeline: true}))
		cfg.Progress = func(Progress) {
			once.Do(func() {
				if err := nc.Kill(context.Background(), "p1"); err != nil {
					t.Error(err)
				}
				time.AfterFunc(2*time.Second, func() {
					if err := nc.Start(context.Background(), "p1"); err != nil {
						t.Error(err)
					}
				})
			})
		}
		res, err := Run(context.Background(), cfg, w.Transactions(), Sources(db))
		if err != nil {
			t.Fatal(err)
		}
		errs := res.Types["insert"].Errors
		t.Logf("%d commits, errors %v, %d reconnects, series %+v", res.Transactions, errs, res.Reconnects, res.Series)
		if !res.Complete {
			t.Fatalf("incomplete: %s", res.StopReason)
		}
		// About 7 attempts a user in 2 s with the backoff; thousands without.
		if errs[ErrConnect] == 0 || res.Errors > 4*40 {
			t.Errorf("errors %v (%d): want some failed reconnections, fewer than 40 a user", errs, res.Errors)
		}
		if res.Reconnects < 4 {
			t.Errorf("%d reconnects of 4 users", res.Reconnects)
		}
		if last := lastSecond(res, cfg.Duration); last.Commits == 0 {
			t.Errorf("last second %+v: no commits after the node came back", last)
		}
	})
}

// withLag tracks every transaction of cfg's users in drv_lag: a
// reconnection must prepare the lag statement again too.
func withLag(t *testing.T, db *sql.DB, cfg Config) Config {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS drv_lag (writer int PRIMARY KEY, seq bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO drv_lag SELECT g, 0 FROM generate_series(0, $1::int - 1) g ON CONFLICT DO NOTHING", cfg.Users); err != nil {
		t.Fatal(err)
	}
	js := make([]*countJournal, cfg.Users)
	for i := range js {
		js[i] = &countJournal{}
	}
	cfg.Lag = func(i int) LagJournal { return js[i] }
	cfg.LagStatement = "UPDATE drv_lag SET seq = $1 WHERE writer = $2"
	cfg.LagEvery = 1
	return cfg
}

// lastSecond is the series' last whole second of a run without warmup
// or cooldown (a sliver may follow it when the ticks ran late).
func lastSecond(res *Result, d time.Duration) Second {
	for _, s := range res.Series {
		if s.T == int(d/time.Second) {
			return s
		}
	}
	return Second{}
}

// countJournal counts the transactions a user tracked, measured or not
// (one user's goroutine only).
type countJournal struct {
	seq, measured, other int64
}

func (j *countJournal) Next() int64 { j.seq++; return j.seq }
func (j *countJournal) Sending(seq, at int64, measured bool) {
	if measured {
		j.measured++
	} else {
		j.other++
	}
}
func (j *countJournal) Done(seq int64, ok bool) {}

func TestPickFollowsWeights(t *testing.T) {
	types := []workload.TxType{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}, {Name: "c", Weight: 0}}
	r := rand.New(rand.NewPCG(1, 2))
	n := [3]int{}
	for range 40000 {
		n[workload.Pick(types, r)]++
	}
	if n[2] != 0 || n[1] < 29000 || n[1] > 31000 {
		t.Errorf("picks %v, want ~10000/30000/0", n)
	}
}

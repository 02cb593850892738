package driver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/workload"
)

func TestConnLost(t *testing.T) {
	for _, c := range []struct {
		err          error
		lost, unsent bool
	}{
		{driver.ErrBadConn, true, true},
		{fmt.Errorf("begin: %w", sql.ErrConnDone), true, true},
		{io.EOF, true, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true, false},
		{fmt.Errorf("write: %w", syscall.EPIPE), true, false},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true, false},
		{errors.New("server closed the connection"), true, false},
		{fmt.Errorf("pipeline connection closed: %w", errors.New("server closed the connection")), true, true},
		{safeErr{}, true, true},
		{errors.New("ERROR: duplicate key (SQLSTATE 23505)"), false, false},
		{errors.New("lag probe row of writer 1 changed 0 rows, want 1"), false, false},
	} {
		if got := connLost(c.err); got != c.lost {
			t.Errorf("connLost(%v) = %v", c.err, got)
		}
		if got := unsent(c.err); got != c.unsent {
			t.Errorf("unsent(%v) = %v", c.err, got)
		}
	}
}

// downFor kills node p of the fake at the driver's first progress tick
// (1 s into the run) and, if up > 0, starts it again up later.
func downFor(t *testing.T, c engine.Cluster, up time.Duration) func(Progress) {
	nc := c.(engine.NodeControl)
	var once sync.Once
	return func(Progress) {
		once.Do(func() {
			if err := nc.Kill(context.Background(), "p"); err != nil {
				t.Error(err)
			}
			if up > 0 {
				time.AfterFunc(up, func() {
					if err := nc.Start(context.Background(), "p"); err != nil {
						t.Error(err)
					}
				})
			}
		})
	}
}

// TestFakeConnectionLostAtStartIsMadeAgain: the node is down as the users
// connect (a route cutting connections for a moment, a node restarting).
// The users make their connections again, asking Pools with one more try
// — which here brings the node back — and the run goes on; before, the
// first lost connection ended the run ("user 1: pipeline: prepare …:
// unexpected EOF" through HAProxy in the HA tests).
func TestFakeConnectionLostAtStartIsMadeAgain(t *testing.T) {
	db, c := fakeDB(t, "")
	nc := c.(engine.NodeControl)
	if err := nc.Kill(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []int
	pools := func(user, tries int, at string) (*sql.DB, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, tries)
		if tries == 1 {
			if err := nc.Start(context.Background(), "p"); err != nil && !strings.Contains(err.Error(), "already up") {
				return nil, err
			}
		}
		return db, nil
	}
	cfg := withEngine(c, Config{Users: 2, Duration: 200 * time.Millisecond, Seed: 5})
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, pools)
	if err != nil {
		t.Fatalf("the run ended on the connection lost at the start: %v", err)
	}
	t.Logf("Pools asked with tries %v; %d commits", calls, res.Transactions)
	if res.Transactions == 0 || !slices.Contains(calls, 1) {
		t.Errorf("%d commits, Pools asked with tries %v: want the users to connect again (tries 1) and commit", res.Transactions, calls)
	}
}

// A node that stays down ends the run with the error, after the users
// tried for a while.
func TestFakeNodeDownAtStartEndsTheRun(t *testing.T) {
	db, c := fakeDB(t, "")
	if err := c.(engine.NodeControl).Kill(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	cfg := withEngine(c, Config{Users: 1, Duration: 200 * time.Millisecond, Seed: 5, StartRetry: 300 * time.Millisecond})
	_, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, Sources(db))
	if err == nil || !strings.Contains(err.Error(), "not made again within 300ms") || !strings.Contains(err.Error(), "down") {
		t.Fatalf("Run with the node down: %v; want the lost connection, named, after the retries", err)
	}
	t.Log(err)
}

// onlyConnErrors fails unless every error of type name is a lost
// connection's; it returns how many.
func onlyConnErrors(t *testing.T, res *Result, name string) int64 {
	t.Helper()
	var n int64
	for code, k := range res.Types[name].Errors {
		if code != ErrConnect && code != ErrConnection {
			t.Errorf("%d errors %q: want only %q and %q", k, code, ErrConnect, ErrConnection)
		}
		n += k
	}
	return n
}

// TestFakeUsersReconnectWhenTheNodeIsBack: the node is down for 1 s of a
// 3 s closed-loop run. Each user's transactions fail, its reconnections
// fail with backoff, then it reconnects and commits again.
func TestFakeUsersReconnectWhenTheNodeIsBack(t *testing.T) {
	db, c := fakeDB(t, "")
	cfg := withEngine(c, Config{Users: 2, Duration: 3 * time.Second, Seed: 4, ThinkMin: time.Millisecond, ThinkMax: time.Millisecond})
	cfg.Progress = downFor(t, c, time.Second)
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commits, errors %v, %d reconnects, series %+v", res.Transactions, res.Types["put"].Errors, res.Reconnects, res.Series)
	n := onlyConnErrors(t, res, "put")
	if !res.Complete || n == 0 || n != res.Errors {
		t.Errorf("complete %v, %d errors (%d of a lost connection)", res.Complete, res.Errors, n)
	}
	// With backoff a user tries about 6 times in 1 s; without, thousands.
	if n > 2*20 {
		t.Errorf("%d failed attempts of 2 users in 1 s down: no backoff?", n)
	}
	if res.Reconnects < 2 {
		t.Errorf("%d reconnects, want at least one per user", res.Reconnects)
	}
	if last := lastSecond(res, cfg.Duration); last.Commits == 0 || last.Errors != 0 {
		t.Errorf("last second %+v: want commits and no errors once the node is back", last)
	}
}

// TestFakeDownNodeBacksOffAndCancelEndsTheWait: a node that stays down
// for the rest of the run costs each user a few attempts a second, and
// the end of ctx cuts a user's backoff short.
func TestFakeDownNodeBacksOffAndCancelEndsTheWait(t *testing.T) {
	db, c := fakeDB(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cfg := withEngine(c, Config{Users: 4, Duration: 30 * time.Second, Seed: 5})
	cfg.Progress = downFor(t, c, 0)
	start := time.Now()
	res, err := Run(ctx, cfg, []workload.TxType{upsertTx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	n := onlyConnErrors(t, res, "put")
	t.Logf("%d commits, errors %v in %v", res.Transactions, res.Types["put"].Errors, took)
	// 2 s down: 0, 50, 100, … ms, then 1 s between attempts: ~7 a user.
	if n == 0 || n > 4*40 || res.Types["put"].Errors[ErrConnect] == 0 {
		t.Errorf("%d failed attempts of 4 users in 2 s down (%v): want a few per user, some of them reconnections", n, res.Types["put"].Errors)
	}
	if res.Complete || res.StopReason != "interrupted" {
		t.Errorf("complete %v, reason %q", res.Complete, res.StopReason)
	}
	if took > 3400*time.Millisecond {
		t.Errorf("Run returned %v after it started, ctx ended at 3 s: a backoff wait outlived ctx", took)
	}
}

// TestFakeOpenLoopWhileTheNodeIsDown: in open loop a user waiting to
// reconnect is a busy user: the schedule goes on, the transactions it
// could not take queue or are skipped as when the server is slow, and
// each still counts once (committed with its latency from the intended
// start, skipped, or failed).
func TestFakeOpenLoopWhileTheNodeIsDown(t *testing.T) {
	db, c := fakeDB(t, "")
	cfg := withEngine(c, Config{Users: 2, Duration: 3 * time.Second, RatePerSec: 200, Seed: 6})
	cfg.Progress = downFor(t, c, 800*time.Millisecond)
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, Sources(db))
	if err != nil {
		t.Fatal(err)
	}
	n := onlyConnErrors(t, res, "put")
	t.Logf("%d commits, %d skipped, errors %v, %d reconnects; latency max %.1f ms", res.Transactions, res.Skipped, res.Types["put"].Errors, res.Reconnects, res.CommitLatency.Max)
	if got := res.Transactions + res.Skipped + n; got < 560 || got > 610 {
		t.Errorf("%d committed + %d skipped + %d failed, want the schedule's ~600", res.Transactions, res.Skipped, n)
	}
	if res.CommitLatency.Count != res.Transactions+res.Skipped {
		t.Errorf("latency count %d, want %d commits + %d skipped", res.CommitLatency.Count, res.Transactions, res.Skipped)
	}
	if n == 0 || n > 2*20 || res.Reconnects < 2 {
		t.Errorf("%d failed, %d reconnects", n, res.Reconnects)
	}
	if res.CommitLatency.Max < 500 {
		t.Errorf("max latency %.1f ms after 800 ms down: the transactions held back should show", res.CommitLatency.Max)
	}
}

type safeErr struct{}

func (safeErr) Error() string     { return "conn closed" }
func (safeErr) SafeToRetry() bool { return true }

const twoMasters = `[node.m1]
site = "a"
role = "master"
[node.m2]
site = "b"
role = "master"
[scheme]
replication = "multimaster"
`

// recordTargets wraps pools and keeps every call's tries per user.
type recordTargets struct {
	mu    sync.Mutex
	tries map[int][]int
}

func (r *recordTargets) wrap(pools Pools) Pools {
	r.tries = map[int][]int{}
	return func(user, tries int, at string) (*sql.DB, error) {
		r.mu.Lock()
		r.tries[user] = append(r.tries[user], tries)
		r.mu.Unlock()
		return pools(user, tries, at)
	}
}

// TestFakeUnavailableSendsTheUserToTheNextNode: an answer the engine
// classifies Unavailable (here the fake's failing commits, XX000) is not
// retried there: the user drops the connection and asks Pools again
// with tries 1, which sends it to the other master, where it goes on.
// (The fake fails every 200th commit of the cluster, so a user whose
// move took as long as the other user's 199 commits — 10 ms on a loaded
// machine — fails its first commit there too and asks with tries 2.)
func TestFakeUnavailableSendsTheUserToTheNextNode(t *testing.T) {
	dbs, c := fakeNodes(t, twoMasters+"fail_every = 200", "m1", "m2")
	cfg := withEngine(c, Config{Users: 2, Duration: time.Second, Seed: 7, MaxRetries: 3})
	cfg.Classify = func(err error) engine.ErrorClass {
		cl := engine.Classify(c, err)
		cl.Unavailable = cl.Code == "XX000"
		return cl
	}
	var rec recordTargets
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, rec.wrap(Sources(dbs...)))
	if err != nil {
		t.Fatal(err)
	}
	failed := res.Types["put"].Errors["XX000"]
	t.Logf("%d commits, errors %v, %d reconnects", res.Transactions, res.Types["put"].Errors, res.Reconnects)
	if failed == 0 || res.Errors != failed || res.Retries != 0 {
		t.Fatalf("errors %v, %d retries: want only XX000, none retried", res.Types["put"].Errors, res.Retries)
	}
	moves := 0
	for user, tries := range rec.tries {
		if len(tries) == 0 || tries[0] != 0 {
			t.Errorf("user %d: tries %v, want 0 first", user, tries)
		}
		for i, k := range tries[1:] {
			if k != 1 && k != tries[i]+1 {
				t.Errorf("user %d: tries %v: each unavailable answer is followed by one call with tries 1, or one more than the last when no commit came in between", user, tries)
			}
			moves++
		}
	}
	// Every unavailable answer but one per user at the very end moves it.
	if int64(moves) > failed || int64(moves) < failed-2 {
		t.Errorf("%d moves for %d unavailable answers", moves, failed)
	}
}

// TestFakeKilledMasterSendsItsUsersToTheOther: a master killed for the
// rest of the run costs its users one failed transaction each, not one
// a second: they reconnect to the other master at once.
func TestFakeKilledMasterSendsItsUsersToTheOther(t *testing.T) {
	dbs, c := fakeNodes(t, twoMasters, "m1", "m2")
	cfg := withEngine(c, Config{Users: 2, Duration: 3 * time.Second, Seed: 8, ThinkMin: time.Millisecond, ThinkMax: time.Millisecond})
	var once sync.Once
	cfg.Progress = func(Progress) {
		once.Do(func() {
			if err := c.(engine.NodeControl).Kill(context.Background(), "m1"); err != nil {
				t.Error(err)
			}
		})
	}
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, Sources(dbs...))
	if err != nil {
		t.Fatal(err)
	}
	n := onlyConnErrors(t, res, "put")
	t.Logf("%d commits, errors %v, %d reconnects", res.Transactions, res.Types["put"].Errors, res.Reconnects)
	// User 0 writes at m1: at most its transaction in flight fails.
	if n > 1 || res.Reconnects < 1 {
		t.Errorf("%d failed transactions, %d reconnects: want at most 1 and the user at m2", n, res.Reconnects)
	}
	if last := lastSecond(res, cfg.Duration); last.Commits == 0 || last.Errors != 0 {
		t.Errorf("last second %+v: want commits and no errors", last)
	}
}

// TestFakeUserGoesOnPastANodeThatKeepsRefusing: a user refused by its
// node tries the next; refused there too, it tries the one after, rather
// than going back and forth to the refusing one as fast as it answers.
// Three single-node fakes: a (refuses one commit in 50), b (refuses every
// one) and c.
func TestFakeUserGoesOnPastANodeThatKeepsRefusing(t *testing.T) {
	a, c := fakeDB(t, "fail_every = 50")
	b, _ := fakeDB(t, "fail_every = 1")
	good, _ := fakeDB(t, "")
	cfg := withEngine(c, Config{Users: 1, Duration: 2 * time.Second, Seed: 9})
	cfg.Classify = func(err error) engine.ErrorClass {
		cl := engine.Classify(c, err)
		cl.Unavailable = cl.Code == "XX000"
		return cl
	}
	res, err := Run(context.Background(), cfg, []workload.TxType{upsertTx()}, Sources(a, b, good))
	if err != nil {
		t.Fatal(err)
	}
	refused := res.Types["put"].Errors["XX000"]
	t.Logf("%d commits, errors %v, %d reconnects", res.Transactions, res.Types["put"].Errors, res.Reconnects)
	// At a, then b refuses: two refusals and the user is at c for good.
	if refused > 3 || res.Transactions < 100 {
		t.Errorf("%d refusals, %d commits: the user should be past b after its first refusal there", refused, res.Transactions)
	}
	if last := lastSecond(res, cfg.Duration); last.Commits == 0 {
		t.Errorf("last second %+v: no commits", last)
	}
}

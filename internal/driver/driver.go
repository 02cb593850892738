// Package driver runs a workload's transactions against database
// connections: closed loop (users with think time) or open loop (a target
// rate with regular or Poisson arrivals, latency counted from the intended
// start), through warmup, measure and cooldown phases. It records per
// transaction type counts, errors by kind, retries and latency histograms,
// and a per-second series.
package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/clock"
	"replab/internal/engine"
	"replab/internal/stats"
	"replab/internal/workload"
)

// Config is how to drive.
type Config struct {
	Users      int
	Warmup     time.Duration
	Duration   time.Duration
	Cooldown   time.Duration
	RatePerSec float64 // > 0: open loop
	// Transactions > 0 ends the measure phase once that many transactions
	// started in it have finished, committed or not (pgbench's -t, over
	// all users), or at Duration if that comes first; the cooldown
	// follows. Closed loop only.
	Transactions int64
	// MeasureEnded, when set, is called once when Transactions ended the
	// measure phase before Duration, with the moment it ended.
	MeasureEnded func(at time.Time)
	Poisson      bool // open loop arrivals: Poisson (true) or regular
	ThinkMin     time.Duration
	ThinkMax     time.Duration
	Seed         int64
	// MaxErrorPct stops the run when, in one second with at least 20
	// attempts, more than this share failed.
	MaxErrorPct float64
	// MaxRetries is how often a transaction that failed with a retryable
	// error (serialization failure, deadlock) is tried again.
	MaxRetries int
	// Classify says what an error means (its code, whether to retry it,
	// whether it lost a conflict): the engine's classifier. Default
	// engine.DefaultClass.
	Classify func(error) engine.ErrorClass
	// Pipeliner, when set, sends a transaction type that has a Batch in
	// one round trip (the engine's engine.Pipeliner).
	Pipeliner engine.Pipeliner
	// Lag, if set, gives user i's lag journal; LagStatement is then run
	// inside every tracked writing transaction with (seq, user).
	Lag          func(user int) LagJournal
	LagStatement string
	// Journal, if set, is run inside every writing transaction with
	// (seq, user), seq counting that user's writing transactions from 1:
	// it records the commit's key in the verification journal (a table),
	// and the driver keeps each one's outcome (Result.Journal), so that
	// what was acknowledged can be looked for at every node afterwards.
	Journal string
	// JournalWriterBase is added to the user's number in the journal's
	// writer column: each measurement of a run journals under writers of
	// its own.
	JournalWriterBase int
	// LagEvery tracks every LagEvery-th transaction of each user (1 tracks
	// all): a stated sample that cuts the probe's extra statement from the
	// other transactions. 0 chooses it (autoLagEvery): about LagBudget
	// tracked transactions per second across all users.
	LagEvery int
	// LagBudget is the automatic sample's tracked transactions per second,
	// all users together; 0 means DefaultLagBudget.
	LagBudget float64
	// NoPipeline sends every statement on its own round trip even when
	// the transaction type and connection could pipeline it.
	NoPipeline bool
	// Progress is called once a second from the driver's own goroutine.
	Progress func(Progress)
	// Observer, if set, sees every transaction's outcome as it happens,
	// in every phase (live metrics).
	Observer Observer
	// Now is the clock (CLOCK_MONOTONIC ns); default clock.Now.
	Now func() int64
}

// Observer sees transactions as they end, from the users' goroutines:
// it must be quick and safe for concurrent use.
type Observer interface {
	// Committed: a transaction of type txType committed, latencyNs after
	// its start (open loop: its intended start).
	Committed(txType string, latencyNs int64)
	// Failed: it failed after its retries, with the error's class (code).
	Failed(txType, code string)
}

// DefaultLagBudget is how many transactions per second, across all users,
// the automatic lag sample tracks at most.
const DefaultLagBudget = 10

// maxLagEvery bounds the automatic sample's N (as the spec bounds
// lag_sample).
const maxLagEvery = 1000000

// autoLagEvery is the automatic lag sample's N — every Nth transaction of
// each user is tracked — so that at most about budget transactions per
// second are. Open loop (rate > 0) takes the target rate; closed loop the
// rate the warmup committed at (warmupCommits over span: the warmup's
// second half, which tracks nothing); without a warmup there is nothing
// to go by and every transaction is tracked.
func autoLagEvery(rate float64, warmupCommits int64, span time.Duration, budget float64) int {
	if budget <= 0 {
		budget = DefaultLagBudget
	}
	tps := rate
	if rate <= 0 {
		if span <= 0 {
			return 1
		}
		tps = float64(warmupCommits) / span.Seconds()
	}
	if !(tps > budget) { // also NaN
		return 1
	}
	return int(min(math.Ceil(tps/budget), maxLagEvery))
}

// LagJournal is the lag probe's record of one user's transactions.
type LagJournal interface {
	Next() int64
	Sending(seq int64, at int64, measured bool)
	Done(seq int64, ok bool)
}

// Progress is the live view printed during a run.
type Progress struct {
	Phase     string
	Elapsed   time.Duration
	Remaining time.Duration
	TPS       float64 // commits in the last second
	P99Ms     float64 // latency p99 in the last second
	Errors    int64   // in the last second
}

// endGrace is how long in-flight transactions may take to finish after the
// last phase ends.
const endGrace = 30 * time.Second

// Phase names.
const (
	Warmup   = "warmup"
	Measure  = "measure"
	Cooldown = "cooldown"
)

// Result is what a run measured. Only the measure phase counts in the
// headline figures.
type Result struct {
	Complete       bool    `json:"complete"`
	StopReason     string  `json:"stop_reason,omitempty"`
	Mode           string  `json:"mode"` // "closed" or "open"
	Users          int     `json:"users"`
	TargetRate     float64 `json:"target_rate_per_s,omitempty"`
	MeasureSeconds float64 `json:"measure_s"`
	// With a count (Config.Transactions): the count, and how many of its
	// transactions finished; fewer when the duration ended the measure
	// phase first.
	TransactionsTarget int64   `json:"transactions_target,omitempty"`
	TransactionsDone   int64   `json:"transactions_done,omitempty"`
	Transactions       int64   `json:"transactions"`
	RowsChanged        int64   `json:"rows_changed"`
	TPM                float64 `json:"tpm"`
	TPS                float64 `json:"tps"`
	Errors             int64   `json:"errors"`
	Retries            int64   `json:"retries"`
	// Conflicts counts attempts that lost to a concurrent transaction
	// (serialization failures, deadlocks, certification failures), retried
	// or not.
	Conflicts int64 `json:"conflicts"`
	// Reconnects counts the connections users made again in the measure
	// phase after theirs broke (a node killed, stopped or restarted); the
	// transactions that broke count as errors "connection" (or the
	// server's code), those that found the node still down as "connect".
	Reconnects    int64                  `json:"reconnects,omitempty"`
	CommitLatency stats.Percentiles      `json:"commit_latency_ms"`
	Types         map[string]*TypeResult `json:"types"`
	// Open loop: how late transactions started against the schedule, and
	// how many were skipped because every user was busy. A skipped
	// transaction still counts in CommitLatency (and the series) with the
	// latency it would at least have had: from its intended start to the
	// moment the driver could next send one (a user took the next job, or
	// the run ended); SkippedLatencyMs summarises those alone.
	BehindScheduleMs *stats.Percentiles `json:"behind_schedule_ms,omitempty"`
	Skipped          int64              `json:"skipped,omitempty"`
	SkippedLatencyMs *stats.Percentiles `json:"skipped_latency_ms,omitempty"`
	// With a lag journal: every LagSampleEvery-th transaction of each user
	// was tracked in the measure phase (and cooldown); LagSampleAuto when
	// the driver chose it, for at most LagBudgetPerS tracked per second.
	// 0 when no transaction started in the measure phase.
	LagSampleEvery int      `json:"lag_sample_every,omitempty"`
	LagSampleAuto  bool     `json:"lag_sample_auto,omitempty"`
	LagBudgetPerS  float64  `json:"lag_budget_per_s,omitempty"`
	Series         []Second `json:"-"`
	// Journal has, per user, the outcome of every writing transaction that
	// ran the Journal statement, over the whole run (nil without one).
	Journal []UserJournal `json:"-"`
	// Gaps are the stretches of at least GapMin without a commit, in ns
	// since the driver's start (all phases).
	Gaps []Gap `json:"-"`
	// Hist is the measure phase's latency histogram (µs) for logs.
	Hist *hdrhistogram.Histogram `json:"-"`
}

// UserJournal is what became of one user's journalled transactions, by
// their seq: acknowledged (COMMIT answered OK), or unknown (the COMMIT
// was sent and no answer came: it may or may not have landed). The others
// were rolled back or never sent.
type UserJournal struct {
	Acked   []int64
	Unknown []int64
}

// TypeResult is one transaction type in the measure phase.
type TypeResult struct {
	Count     int64             `json:"count"`
	Errors    map[string]int64  `json:"errors"` // by engine.ErrorClass.Code
	Retries   int64             `json:"retries"`
	Conflicts int64             `json:"conflicts"`
	LatencyMs stats.Percentiles `json:"latency_ms"`
	hist      *hdrhistogram.Histogram
}

// Second is one second of the run (all phases).
type Second struct {
	T       int // seconds since start
	Phase   string
	Commits int64
	Errors  int64
	P50Ms   float64
	P99Ms   float64
	MaxMs   float64
}

// Targets gives a user the pool a transaction type runs on: at is the
// type's workload.TxType.At. Each user takes one connection from each pool
// it is given, and keeps it until it breaks or its node says it cannot
// serve (engine.ErrorClass.Unavailable); it then asks Targets again and
// takes a new connection from the pool it gets (reconnect.go), so a
// Targets may move a user to another node. tries counts the user's
// failures in a row there (lost connections, failed reconnections,
// unavailable answers; 0 at the start and once a transaction went
// through): a client with a list of nodes tries the next one each time.
type Targets func(user, tries int, at string) (*sql.DB, error)

// Sources is Targets for types that all run at a source: user i writes at
// dbs[(i + tries) % len(dbs)]. Other places are an error.
func Sources(dbs ...*sql.DB) Targets {
	return func(user, tries int, at string) (*sql.DB, error) {
		if at != workload.AtSource {
			return nil, fmt.Errorf("no node for transactions at %q: only sources", at)
		}
		return dbs[(user+tries)%len(dbs)], nil
	}
}

// Run drives types (each user with its own connections from targets)
// until the phases are over, ctx ends, or errors pass the threshold. The
// result is always returned, marked incomplete when the run did not
// finish. targets may be nil when every type is an Op (no SQL).
func Run(ctx context.Context, cfg Config, types []workload.TxType, targets Targets) (*Result, error) {
	if cfg.Users < 1 || len(types) == 0 {
		return nil, errors.New("driver: need users and transaction types")
	}
	if targets == nil && !workload.OpsOnly(types) {
		return nil, errors.New("driver: SQL transaction types need connections")
	}
	if cfg.Transactions > 0 && cfg.RatePerSec > 0 {
		return nil, errors.New("driver: a count of transactions is for closed loop; with a rate the duration decides")
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	if cfg.Classify == nil {
		cfg.Classify = engine.DefaultClass
	}
	return newRun(cfg, types).run(ctx, targets)
}

func newRun(cfg Config, types []workload.TxType) *run {
	if cfg.LagBudget <= 0 {
		cfg.LagBudget = DefaultLagBudget
	}
	d := &run{cfg: cfg, types: types, rec: newRecorder(types, cfg.Observer)}
	switch {
	case cfg.LagEvery >= 1:
		d.fixedEvery = int64(cfg.LagEvery)
	case cfg.RatePerSec > 0:
		d.fixedEvery = int64(autoLagEvery(cfg.RatePerSec, 0, 0, cfg.LagBudget))
	}
	return d
}

type run struct {
	cfg   Config
	types []workload.TxType
	rec   *recorder
	start int64 // ns
	stop  atomic.Pointer[string]
	// end is when the last phase ends, measureEnd when the measure phase
	// does (ns); both move earlier once Config.Transactions are done.
	end        atomic.Int64
	measureEnd atomic.Int64
	// With Config.Transactions: how many measure-phase transactions users
	// took and finished; measureDone closes when the count ends the phase.
	claimed     atomic.Int64
	finished    atomic.Int64
	measureDone chan struct{}

	// The lag sample's N: fixed before the users start (LagEvery ≥ 1, or
	// open loop), or chosen once by the first user to start a transaction
	// after the warmup, from warmupCommits (commits returned during it).
	fixedEvery    int64
	chooseEvery   sync.Once
	chosenEvery   atomic.Int64
	warmupCommits atomic.Int64
	reconnects    atomic.Int64 // in the measure phase
}

// lagEvery is the N a transaction starting in phase uses: every
// transaction in the warmup of an automatic closed-loop sample, then the
// N chosen exactly once from the warmup's commit rate. sync.Once makes
// every caller wait for the choice, so no transaction after the warmup
// uses the warmup's N.
func (d *run) lagEvery(phase string) int64 {
	if d.fixedEvery > 0 {
		return d.fixedEvery
	}
	if phase == Warmup {
		return 1
	}
	d.chooseEvery.Do(func() {
		d.chosenEvery.Store(int64(autoLagEvery(0, d.warmupCommits.Load(), d.cfg.Warmup/2, d.cfg.LagBudget)))
	})
	return d.chosenEvery.Load()
}

// rateHalf reports whether t falls in the second half of the warmup of an
// automatic closed-loop sample. The first half tracks every transaction
// (the watchers learn each replica's lag floor from them); the second
// tracks none, so its commit rate is the workload's own and N does not
// overshoot the budget by the probe's cost.
func (d *run) rateHalf(t int64) bool {
	return d.fixedEvery == 0 && d.cfg.Lag != nil && d.phaseAt(t) == Warmup && time.Duration(t-d.start) >= d.cfg.Warmup/2
}

// lagSampleEvery is the N used after the warmup; 0 if it was never chosen.
func (d *run) lagSampleEvery() int64 {
	if d.fixedEvery > 0 {
		return d.fixedEvery
	}
	return d.chosenEvery.Load()
}

func (d *run) phaseAt(t int64) string {
	switch {
	case time.Duration(t-d.start) < d.cfg.Warmup:
		return Warmup
	case t < d.measureEnd.Load():
		return Measure
	default:
		return Cooldown
	}
}

func (d *run) total() time.Duration { return d.cfg.Warmup + d.cfg.Duration + d.cfg.Cooldown }

// measureSeconds is how long the measure phase lasted (or is to last).
func (d *run) measureSeconds() float64 {
	return time.Duration(d.measureEnd.Load() - d.start - int64(d.cfg.Warmup)).Seconds()
}

// claim takes one of Config.Transactions for a transaction starting at t:
// counted says it is one of them, ok false that none is left (the user
// waits for the measure phase to end).
func (d *run) claim(t int64) (counted, ok bool) {
	if d.cfg.Transactions <= 0 || d.phaseAt(t) != Measure {
		return false, true
	}
	if d.claimed.Add(1) > d.cfg.Transactions {
		return false, false
	}
	return true, true
}

// finish counts a claimed transaction done; the last one ends the
// measure phase now and moves the cooldown's end with it.
func (d *run) finish() {
	if d.finished.Add(1) != d.cfg.Transactions {
		return
	}
	now := d.cfg.Now()
	if now >= d.measureEnd.Load() {
		return // the duration ended it first
	}
	d.measureEnd.Store(now)
	d.end.Store(now + int64(d.cfg.Cooldown))
	close(d.measureDone)
	if d.cfg.MeasureEnded != nil {
		d.cfg.MeasureEnded(time.Now()) // wall time, as the runner's marks are
	}
}

func (d *run) run(ctx context.Context, targets Targets) (*Result, error) {
	// Connections and prepared statements first, so the clock starts
	// with every user ready.
	users := make([]*user, d.cfg.Users)
	for i := range users {
		u, err := d.newUser(ctx, i, targets)
		if err != nil {
			for _, v := range users[:i] {
				v.close()
			}
			return nil, err
		}
		users[i] = u
	}
	defer func() {
		for _, u := range users {
			u.close()
		}
	}()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.start = d.cfg.Now()
	end := d.start + int64(d.total())
	d.end.Store(end)
	d.measureEnd.Store(d.start + int64(d.cfg.Warmup+d.cfg.Duration))
	d.measureDone = make(chan struct{})
	var wg sync.WaitGroup
	var open *scheduler
	if d.cfg.RatePerSec > 0 {
		open = newScheduler(d, end)
		wg.Add(1)
		go func() { defer wg.Done(); open.run(rctx) }()
		for _, u := range users {
			wg.Add(1)
			go func() { defer wg.Done(); u.openLoop(rctx, open) }()
		}
	} else {
		for _, u := range users {
			wg.Add(1)
			go func() { defer wg.Done(); u.closedLoop(rctx) }()
		}
	}
	d.monitor(rctx, cancel)
	// At the natural end users finish the transaction they are in (so the
	// server and the counts agree); only a stuck server is cut short.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(endGrace):
		reason := fmt.Sprintf("stopped: transactions still running %s after the end", endGrace)
		d.stop.CompareAndSwap(nil, &reason)
		cancel()
		<-done
	}
	cancel()
	if open != nil {
		open.drain(d.cfg.Now()) // skipped ones no user could take before the end
	}

	res := d.rec.result(d)
	res.Users = d.cfg.Users
	res.Mode = "closed"
	if open != nil {
		res.Mode = "open"
		res.TargetRate = d.cfg.RatePerSec
		bs := stats.FromMicros(open.behind)
		res.BehindScheduleMs = &bs
		res.Skipped = open.skipped.Load()
		sl := stats.FromMicros(d.rec.skippedHist)
		res.SkippedLatencyMs = &sl
	}
	if d.cfg.Lag != nil {
		res.LagSampleEvery = int(d.lagSampleEvery())
		if d.cfg.LagEvery < 1 {
			res.LagSampleAuto, res.LagBudgetPerS = true, d.cfg.LagBudget
		}
	}
	res.Reconnects = d.reconnects.Load()
	if d.cfg.Transactions > 0 {
		res.TransactionsTarget, res.TransactionsDone = d.cfg.Transactions, min(d.finished.Load(), d.cfg.Transactions)
	}
	d.rec.mu.Lock()
	for _, g := range d.rec.gaps {
		res.Gaps = append(res.Gaps, Gap{From: g.From - d.start, To: g.To - d.start})
	}
	d.rec.mu.Unlock()
	if d.cfg.Journal != "" {
		for _, u := range users {
			res.Journal = append(res.Journal, u.journal)
		}
	}
	res.Complete = true
	if r := d.stop.Load(); r != nil {
		res.Complete, res.StopReason = false, *r
	} else if ctx.Err() != nil {
		res.Complete, res.StopReason = false, "interrupted"
	}
	return res, nil
}

// monitor ticks once a second: progress, the per-second series and the
// error threshold.
func (d *run) monitor(ctx context.Context, cancel context.CancelFunc) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for sec := 1; ; sec++ {
		end := d.end.Load() // earlier once a count of transactions is done
		var deadline <-chan time.Time
		if rem := time.Duration(end - d.cfg.Now()); rem < time.Second {
			deadline = time.After(max(rem, 0))
		}
		select {
		case <-ctx.Done():
			d.rec.closeSecond(sec, d.phaseAt(d.cfg.Now()-1))
			return
		case <-deadline:
			d.rec.closeSecond(sec, d.phaseAt(end-1))
			return
		case <-tk.C:
		}
		now := d.cfg.Now()
		s := d.rec.closeSecond(sec, d.phaseAt(now-int64(time.Second/2)))
		attempts := s.Commits + s.Errors
		if d.cfg.MaxErrorPct > 0 && attempts >= 20 && float64(s.Errors)*100 > d.cfg.MaxErrorPct*float64(attempts) {
			reason := fmt.Sprintf("stopped: %d of %d transactions failed in second %d (more than %.0f%%); last error: %s",
				s.Errors, attempts, sec, d.cfg.MaxErrorPct, d.rec.lastError())
			d.stop.Store(&reason)
			cancel()
			return
		}
		if d.cfg.Progress != nil {
			d.cfg.Progress(Progress{
				Phase: s.Phase, Elapsed: time.Duration(now - d.start), Remaining: time.Duration(max(end-now, 0)),
				TPS: float64(s.Commits), P99Ms: s.P99Ms, Errors: s.Errors,
			})
		}
	}
}

func (u *user) closedLoop(ctx context.Context) {
	for ctx.Err() == nil {
		start := u.d.cfg.Now()
		if start >= u.d.end.Load() {
			return
		}
		counted, ok := u.d.claim(start)
		if !ok {
			// The count is taken: wait for the measure phase to end
			// (its last transactions finishing, or the duration).
			t := time.NewTimer(time.Duration(u.d.measureEnd.Load() - start))
			select {
			case <-ctx.Done():
			case <-u.d.measureDone:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		u.do(ctx, start)
		if counted {
			u.d.finish()
		}
		if think := u.think(); think > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(think):
			}
		}
	}
}

func (u *user) think() time.Duration {
	lo, hi := u.d.cfg.ThinkMin, u.d.cfg.ThinkMax
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(u.r.Int64N(int64(hi-lo)+1))
}

func (u *user) openLoop(ctx context.Context, s *scheduler) {
	for {
		select {
		case <-ctx.Done():
			return
		case intended, ok := <-s.jobs:
			if !ok {
				return
			}
			now := u.d.cfg.Now()
			s.drain(now) // this user could have sent the skipped ones now, at the earliest
			u.d.rec.behind(now-intended, u.d.phaseAt(intended) == Measure)
			u.do(ctx, intended)
		}
	}
}

// scheduler releases open-loop transactions at their intended times.
type scheduler struct {
	d       *run
	end     int64
	jobs    chan int64
	skipped atomic.Int64
	behind  *hdrhistogram.Histogram

	mu      sync.Mutex
	pending []int64 // intended starts of skipped transactions, not yet recorded
}

// drain records every skipped transaction still pending with the latency
// it would at least have had, had it been sent at now.
func (s *scheduler) drain(now int64) {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, at := range p {
		s.d.rec.skip(now-at, s.d.phaseAt(at) == Measure)
	}
}

func newScheduler(d *run, end int64) *scheduler {
	// A short queue absorbs jitter; beyond it the driver cannot keep up
	// and the transaction is skipped (and counted) rather than piling up.
	return &scheduler{d: d, end: end, jobs: make(chan int64, 4*d.cfg.Users), behind: d.rec.behindHist}
}

func (s *scheduler) run(ctx context.Context) {
	defer close(s.jobs)
	r := rand.New(rand.NewPCG(uint64(s.d.cfg.Seed), math.MaxUint32))
	gap := float64(time.Second) / s.d.cfg.RatePerSec
	next := float64(s.d.start)
	for {
		if s.d.cfg.Poisson {
			next += r.ExpFloat64() * gap
		} else {
			next += gap
		}
		at := int64(next)
		if at >= s.end {
			return
		}
		if wait := time.Duration(at - s.d.cfg.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		select {
		case s.jobs <- at:
		default:
			if s.d.phaseAt(at) == Measure {
				s.skipped.Add(1)
			}
			s.mu.Lock()
			s.pending = append(s.pending, at)
			s.mu.Unlock()
		}
	}
}

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
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/clock"
	"replab/internal/engine"
	"replab/internal/stats"
	"replab/internal/workload"
)

// Pools gives a user the pool a transaction type runs on: at is the
// type's workload.TxType.At. Each user takes one connection from each pool
// it is given, and keeps it until it breaks or its node says it cannot
// serve (engine.ErrorClass.Unavailable); it then asks Pools again and
// takes a new connection from the pool it gets (reconnect.go), so a
// Pools may move a user to another node. tries counts the user's
// failures in a row there (lost connections, failed reconnections,
// unavailable answers; 0 at the start and once a transaction went
// through): a client with a list of nodes tries the next one each time.
type Pools func(user, tries int, at string) (*sql.DB, error)

// Sources is Pools for types that all run at a source: user i writes at
// dbs[(i + tries) % len(dbs)]. Other places are an error.
func Sources(dbs ...*sql.DB) Pools {
	return func(user, tries int, at string) (*sql.DB, error) {
		if at != workload.AtSource {
			return nil, fmt.Errorf("no node for transactions at %q: only sources", at)
		}
		return dbs[(user+tries)%len(dbs)], nil
	}
}

// Run drives types (each user with its own connections from pools)
// until the phases are over, ctx ends, or errors pass the threshold. The
// result is always returned, marked incomplete when the run did not
// finish. pools may be nil when every type is an Op (no SQL).
func Run(ctx context.Context, cfg Config, types []workload.TxType, pools Pools) (*Result, error) {
	if cfg.Users < 1 || len(types) == 0 {
		return nil, errors.New("driver: need users and transaction types")
	}
	if pools == nil && !workload.OpsOnly(types) {
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
	return newRun(cfg, types).run(ctx, pools)
}

func newRun(cfg Config, types []workload.TxType) *run {
	if cfg.LagBudget <= 0 {
		cfg.LagBudget = DefaultLagBudget
	}
	d := &run{cfg: cfg, types: types, rec: newRecorder(types, cfg.Observer), groups: newGroups(cfg)}
	d.sampler, _ = cfg.History.(HistorySampler)
	d.procs.Store(int64(cfg.Users)) // the users' own process numbers come first
	for u := range cfg.Users {
		d.procUser = append(d.procUser, u)
	}
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

	// The history (history.go): Config.History as a sampler, if it is
	// one; the process numbers given out; the operations recorded; the
	// first write error. cancel ends the run early.
	sampler                        HistorySampler
	procs                          atomic.Int64
	histOps, histMeasure, histInfo atomic.Int64
	histErr                        atomic.Pointer[string]
	cancel                         context.CancelFunc

	// Reads after writes (readafter.go): commit positions that could not
	// be taken, and the first such error.
	fenceErrors atomic.Int64
	fenceErr    atomic.Pointer[string]

	groups *groups
	// procUser: the user of each process number (history.go), under
	// procMu.
	procMu   sync.Mutex
	procUser []int
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

func (d *run) run(ctx context.Context, pools Pools) (*Result, error) {
	// Connections and prepared statements first, so the clock starts
	// with every user ready.
	users := make([]*user, d.cfg.Users)
	for i := range users {
		u, err := d.newUser(ctx, i, pools)
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
	d.cancel = cancel
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
	res.History = d.historyCount()
	res.Groups = d.groups.result(d.types, res.MeasureSeconds)
	d.procMu.Lock()
	res.ProcUser = d.procUser
	d.procMu.Unlock()
	res.FenceErrors = d.fenceErrors.Load()
	if e := d.fenceErr.Load(); e != nil {
		res.FenceError = *e
	}
	res.StartNs = d.start
	if d.cfg.Transactions > 0 {
		res.TransactionsTarget, res.TransactionsDone = d.cfg.Transactions, min(d.finished.Load(), d.cfg.Transactions)
	}
	d.rec.mu.Lock()
	for _, g := range d.rec.gaps {
		res.Gaps = append(res.Gaps, Gap{From: g.From - d.start, To: g.To - d.start})
	}
	d.rec.mu.Unlock()
	if d.cfg.AckStatement != "" {
		for _, u := range users {
			res.Acks = append(res.Acks, u.acks)
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

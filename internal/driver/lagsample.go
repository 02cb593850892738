package driver

import (
	"math"
	"time"
)

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

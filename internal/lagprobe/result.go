package lagprobe

import (
	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/stats"
)

// Result is one replica's lag over the run. For measured transactions that
// committed, once the writers have stopped and unless Forgotten > 0:
//
//	Tracked = LagMs.Count + NotVisibleAtEnd + VisibleBeforeWatch + Unpositioned + Truncated
type Result struct {
	Replica string `json:"replica"`
	// Method is how the lags were measured: MethodStamps (tracked
	// transactions' stamps read back at the replica) or MethodPositions
	// (every transaction's commit position against the replica's applied
	// position).
	Method string `json:"method"`
	// LagMs summarises the lags: percentiles with HdrHistogram's 3
	// significant digits, Max exact; LagMinMs is the exact minimum.
	LagMs    stats.Percentiles `json:"lag_ms"`
	LagMinMs float64           `json:"lag_min_ms"`
	// Tracked counts measured transactions whose COMMIT returned ok (of
	// the writers watched at this replica: see WatchOptions.Skip).
	Tracked int64 `json:"tracked"`
	// NotVisibleAtEnd counts those never seen at this replica (the
	// deferred queue when Results was called).
	NotVisibleAtEnd int64 `json:"not_visible_at_end"`
	// VisibleBeforeWatch counts those already visible at the watcher's
	// first poll: their lag is unknown.
	VisibleBeforeWatch int64 `json:"visible_before_watch"`
	// Forgotten counts seqs the journal had released before this replica
	// reached them (only when a watcher starts after the writers).
	Forgotten int64 `json:"forgotten,omitempty"`
	// Unpositioned counts, with positions, the measured transactions that
	// committed without a position to compare (the server did not say):
	// they have no lag. Truncated counts those whose position the replica
	// had reached before the oldest poll still remembered when the commit
	// returned (it took longer than the polls kept): no lag either.
	Unpositioned int64 `json:"unpositioned,omitempty"`
	Truncated    int64 `json:"truncated,omitempty"`
	// FailedVisible counts transactions whose COMMIT was reported failed
	// but whose change reached this replica.
	FailedVisible int64 `json:"failed_visible"`

	// ResolutionMs is the achieved mean interval between the starts of
	// consecutive polls (those not held back for lack of anything to look
	// for). A change is dated at the end of the first poll that sees it,
	// so each lag is at most one interval plus one poll duration above the
	// true one (ResolutionMs/2 + PollP50Ms on average), never below it.
	ResolutionMs  float64 `json:"resolution_ms"`
	IntervalP99Ms float64 `json:"interval_p99_ms"` // between consecutive poll starts
	PollP50Ms     float64 `json:"poll_p50_ms"`     // duration of one poll
	PollP99Ms     float64 `json:"poll_p99_ms"`
	PollMaxMs     float64 `json:"poll_max_ms"`
	Polls         int64   `json:"polls"`
	PollErrors    int64   `json:"poll_errors"`
	// Adaptive polling (Config.PollAlways unset): FloorMs is the final
	// floor, the time after COMMIT sent before which no poll was made;
	// WindowHits counts measured transactions seen by the first poll
	// after it faster than any recent one (each halved the floor: their
	// lag may be up to the floor too high); IdleWaits counts times the
	// watcher had nothing to look for.
	FloorMs    float64 `json:"floor_ms"`
	WindowHits int64   `json:"window_hits"`
	IdleWaits  int64   `json:"idle_waits"`
	LastError  string  `json:"last_error,omitempty"`
	// Stale counts polls × writers showing a seq this run never issued;
	// Regressions those showing a seq lower than seen before.
	Stale       int64 `json:"stale"`
	Regressions int64 `json:"regressions"`

	// Series has one entry per second of the run (from Config.Start) in
	// which this replica was polled: the lags observed in that second.
	Series []SecondStats `json:"series"`

	// Histogram holds every recorded lag in µs (a copy), for HDR logs and
	// merging across repetitions.
	Histogram *hdrhistogram.Histogram `json:"-"`

	// CatchUpNs, once the writers have stopped and the replica caught up,
	// is the measure phase's last tracked transaction's lag: from the
	// latest COMMIT sent among the measured transactions seen here to the
	// end of the poll that saw the last of them — how long the replica
	// took to apply what was committed when the measurement ended (0
	// before any was seen; -1 when a measured transaction that committed
	// was still not seen here).
	CatchUpNs int64 `json:"-"`
}

// The methods of Result.Method.
const (
	MethodStamps    = "stamps"
	MethodPositions = "positions"
)

// SecondStats is one second of a replica's lag series.
type SecondStats struct {
	Second int64   `json:"second"` // since Config.Start
	Count  int64   `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"` // exact
}

// Results reports every watched replica, by name. It may be called while
// watchers run; the counts are final once writers and watchers stopped.
func (p *Probe) Results() map[string]Result {
	out := map[string]Result{}
	for _, r := range *p.replicas.Load() {
		var tracked int64
		for w, wr := range p.writers {
			if !r.skip[w] {
				tracked += wr.tracked.Load()
			}
		}
		out[r.name] = r.result(tracked)
	}
	for _, r := range *p.preplicas.Load() {
		out[r.name] = r.result()
	}
	return out
}

func (r *replica) result(tracked int64) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolve()
	res := Result{
		Replica:            r.name,
		Method:             MethodStamps,
		Tracked:            tracked,
		VisibleBeforeWatch: r.before,
		Forgotten:          r.forgotten,
		FailedVisible:      r.failedVisible,
		Stale:              r.stale,
		Regressions:        r.regressions,
		CatchUpNs:          max(r.advancedAt-r.lastSent, 0),
	}
	r.fill(&res)
	for w, wr := range r.p.writers {
		if r.skip[w] {
			continue
		}
		for s, end := r.vis[w]+1, wr.issued.Load(); s <= end; s++ {
			if e, ok := wr.load(s); ok && e&stMask == stOK && e&measuredBit != 0 {
				res.NotVisibleAtEnd++
			}
		}
	}
	if res.NotVisibleAtEnd > 0 {
		res.CatchUpNs = -1
	}
	res.FloorMs, res.WindowHits, res.IdleWaits = nsToMs(r.floor), r.hits, r.waits
	return res
}

func usToMs(us int64) float64 { return float64(us) / 1e3 }
func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }

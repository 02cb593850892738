package monitor

import (
	"math"
	"sort"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/stats"
)

// ReplicaSummary is the engine's view of one replica over the measure
// phase, from ReplicationState sampled every interval. A replica fed by
// several upstreams (multi-master) sums its streams' backlogs.
type ReplicaSummary struct {
	From    string `json:"from"` // upstream node(s), comma-separated
	Kind    string `json:"kind"` // physical, logical, pglogical, … (the engine's)
	Samples int    `json:"samples"`
	// The backlog: what the replica has not applied yet, in BacklogUnit
	// (PostgreSQL: bytes, the upstream's current WAL position minus the
	// replica's replay position; a write-set queue: write-sets). Growth is
	// the least-squares slope times the phase's length: how much the
	// backlog grew over the phase. LagGrows says whether that growth is
	// real (see LagGrowthMin and LagGrowthMinT), i.e. the replica falls
	// further behind.
	BacklogUnit   string  `json:"backlog_unit"`
	BacklogMax    int64   `json:"backlog_max"`
	BacklogMean   float64 `json:"backlog_mean"`
	BacklogGrowth float64 `json:"backlog_growth"`
	LagGrows      bool    `json:"lag_grows"`
	// The same in bytes, when the engine counts its backlog in bytes
	// (the fields of replab 0.1; zero in other units).
	BytesBehindMax    int64   `json:"bytes_behind_max"`
	BytesBehindMean   float64 `json:"bytes_behind_mean"`
	BytesBehindGrowth float64 `json:"bytes_behind_growth"`
	// ReplayLagMs summarises the engine's own lag estimate
	// (pg_stat_replication.replay_lag) over samples where it had one.
	ReplayLagMs *stats.Percentiles `json:"replay_lag_ms,omitempty"`
	// SyncStates counts the samples of each of the engine's sync state
	// words (PostgreSQL's sync_state; MariaDB semi-sync's "semi-sync" and
	// "async-fallback"), and SyncStateChanges how often the word changed
	// from one sample to the next: how long, and how often, a synchronous
	// scheme ran otherwise.
	SyncStates       map[string]int `json:"sync_states,omitempty"`
	SyncStateChanges int            `json:"sync_state_changes,omitempty"`
	// StoppedError is the error the replica's replication stopped on, as
	// the engine said at the phase's last sample that had one
	// (engine.ReplicaState.Error), and StoppedSamples how many samples of
	// the phase said it was stopped: a replica that applies nothing
	// whatever its resources.
	StoppedError   string `json:"stopped_error,omitempty"`
	StoppedSamples int    `json:"stopped_samples,omitempty"`
}

// Lag growth: a backlog grows when the least-squares fit of it over the
// measure phase rises by at least LagGrowthMin of its unit and the slope
// is at least LagGrowthMinT standard errors above zero. A replica keeping
// up at high throughput has a large but steady backlog (bytes in flight
// and being replayed); only a significant trend counts.
const (
	LagGrowthMinBytes = 64 << 10
	LagGrowthMinT     = 3.0
)

// LagGrowthMin is the least growth that counts, per backlog unit: 64 KiB,
// or 50 transactions or write-sets (a few KiB each in a small workload).
// committed, when known (> 0), is how many transactions the sources
// committed in the measure phase: a slow workload (60 a minute across a
// serial line) never reaches 50, so a tenth of what was committed, at
// least 3, counts too.
func LagGrowthMin(unit string, committed int64) float64 {
	if unit == engine.UnitBytes || unit == "" {
		return LagGrowthMinBytes
	}
	if committed > 0 {
		return min(50, max(3, float64(committed)/10))
	}
	return 50
}

// replPoint is every replica's state at one sample.
type replPoint struct {
	t    time.Time
	rows []engine.ReplicaState
}

// lagTrend fits y = a + b·x by least squares and returns the slope b and
// its t statistic (b / standard error); t is +Inf for a perfect rising
// line, 0 with fewer than 3 points.
func lagTrend(x, y []float64) (slope, t float64) {
	n := float64(len(x))
	if len(x) < 3 || len(x) != len(y) {
		return 0, 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxy += (x[i] - mx) * (y[i] - my)
	}
	if sxx == 0 {
		return 0, 0
	}
	slope = sxy / sxx
	var sse float64
	for i := range x {
		r := y[i] - (my + slope*(x[i]-mx))
		sse += r * r
	}
	se := math.Sqrt(sse / (n - 2) / sxx)
	switch {
	case se > 0:
		return slope, slope / se
	case slope > 0:
		return slope, math.Inf(1)
	case slope < 0:
		return slope, math.Inf(-1)
	}
	return 0, 0
}

// summarizeReplication summarises each replica (by node name) over
// [start, end].
func summarizeReplication(pts []replPoint, start, end time.Time, committed int64) map[string]ReplicaSummary {
	type acc struct {
		from, kind, unit map[string]bool
		x, y             []float64
		lag              []float64
		syncs            map[string]int
		lastSync         map[string]string // by upstream
		syncChanges      int
		stopped          int
		stoppedErr       string
	}
	accs := map[string]*acc{}
	for _, p := range pts {
		if p.t.Before(start) || p.t.After(end) {
			continue
		}
		sum := map[string]int64{}
		for _, r := range p.rows {
			a := accs[r.Node]
			if a == nil {
				a = &acc{from: map[string]bool{}, kind: map[string]bool{}, unit: map[string]bool{}, syncs: map[string]int{}, lastSync: map[string]string{}}
				accs[r.Node] = a
			}
			a.from[r.From], a.kind[r.Kind], a.unit[r.BacklogUnit] = true, true, true
			sum[r.Node] += max(r.Backlog, 0)
			if r.ReplayLagMs >= 0 {
				a.lag = append(a.lag, r.ReplayLagMs)
			}
			if r.Error != "" {
				a.stopped++
				a.stoppedErr = r.Error
				if r.From != "" && !strings.Contains(r.Error, r.From) {
					a.stoppedErr = "from " + r.From + ": " + r.Error
				}
			}
			if r.SyncState != "" {
				a.syncs[r.SyncState]++
				if last := a.lastSync[r.From]; last != "" && last != r.SyncState {
					a.syncChanges++
				}
				a.lastSync[r.From] = r.SyncState
			}
		}
		for node, b := range sum {
			a := accs[node]
			a.x = append(a.x, p.t.Sub(start).Seconds())
			a.y = append(a.y, float64(b))
		}
	}
	out := map[string]ReplicaSummary{}
	secs := end.Sub(start).Seconds()
	for node, a := range accs {
		s := ReplicaSummary{From: joinKeys(a.from), Kind: joinKeys(a.kind), BacklogUnit: joinKeys(a.unit), Samples: len(a.y)}
		for _, y := range a.y {
			s.BacklogMax = max(s.BacklogMax, int64(y))
			s.BacklogMean += y
		}
		if len(a.y) > 0 {
			s.BacklogMean /= float64(len(a.y))
		}
		slope, t := lagTrend(a.x, a.y)
		s.BacklogGrowth = slope * secs
		s.LagGrows = s.BacklogGrowth >= LagGrowthMin(s.BacklogUnit, committed) && t >= LagGrowthMinT
		if s.BacklogUnit == engine.UnitBytes {
			s.BytesBehindMax, s.BytesBehindMean, s.BytesBehindGrowth = s.BacklogMax, s.BacklogMean, s.BacklogGrowth
		}
		if len(a.syncs) > 0 {
			s.SyncStates, s.SyncStateChanges = a.syncs, a.syncChanges
		}
		s.StoppedSamples, s.StoppedError = a.stopped, a.stoppedErr
		if len(a.lag) > 0 {
			h := stats.NewLatencyHist()
			for _, ms := range a.lag {
				_ = h.RecordValue(max(int64(ms*1000), 1))
			}
			p := stats.FromMicros(h)
			s.ReplayLagMs = &p
		}
		out[node] = s
	}
	return out
}

func joinKeys(m map[string]bool) string {
	k := make([]string, 0, len(m))
	for s := range m {
		if s != "" {
			k = append(k, s)
		}
	}
	sort.Strings(k)
	return strings.Join(k, ",")
}

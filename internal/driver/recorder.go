package driver

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/stats"
	"replab/internal/workload"
)

// recorder collects outcomes from every user. One mutex: a few hundred
// nanoseconds per transaction at most, far below a database round trip.
type recorder struct {
	mu      sync.Mutex
	names   []string
	types   []*TypeResult
	sec     *hdrhistogram.Histogram // current second, all phases
	secOK   int64
	secErr  int64
	series  []Second
	lastErr string

	committed, rows, errs, retries, conflicts int64 // measure phase

	behindHist  *hdrhistogram.Histogram
	skippedHist *hdrhistogram.Histogram // measure phase, µs

	// lastCommit and gaps: every stretch of at least GapMin without a
	// commit (all phases), for the time a fault left clients unable to
	// write.
	lastCommit int64
	gaps       []Gap

	obs Observer // nil: none
}

// GapMin is the shortest stretch without a commit the driver records.
const GapMin = 250 * time.Millisecond

// maxGaps bounds the gaps kept (a slow open loop has one per transaction).
const maxGaps = 10000

// Gap is a stretch without a commit, on the driver's clock (ns).
type Gap struct{ From, To int64 }

func newRecorder(types []workload.TxType, obs Observer) *recorder {
	r := &recorder{sec: stats.NewLatencyHist(), behindHist: stats.NewLatencyHist(), skippedHist: stats.NewLatencyHist(), obs: obs}
	for _, t := range types {
		r.names = append(r.names, t.Name)
		r.types = append(r.types, &TypeResult{Errors: map[string]int64{}, hist: stats.NewLatencyHist()})
	}
	return r
}

func micros(ns int64) int64 { return max(ns/1000, 1) }

func (r *recorder) commit(ti int, measured bool, now, latencyNs, rows, retries, conflicts int64) {
	if r.obs != nil {
		r.obs.Committed(r.names[ti], latencyNs)
	}
	us := micros(latencyNs)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.sec.RecordValue(us)
	r.secOK++
	if r.lastCommit != 0 && now-r.lastCommit >= int64(GapMin) && len(r.gaps) < maxGaps {
		r.gaps = append(r.gaps, Gap{From: r.lastCommit, To: now})
	}
	r.lastCommit = max(r.lastCommit, now)
	if !measured {
		return
	}
	t := r.types[ti]
	t.Count++
	t.Retries += retries
	t.Conflicts += conflicts
	_ = t.hist.RecordValue(us)
	r.committed++
	r.rows += rows
	r.retries += retries
	r.conflicts += conflicts
}

func (r *recorder) fail(ti int, measured bool, now int64, kind string, err error, retries, conflicts int64) {
	if r.obs != nil {
		r.obs.Failed(r.names[ti], kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secErr++
	r.lastErr = err.Error()
	if !measured {
		return
	}
	t := r.types[ti]
	t.Errors[kind]++
	t.Retries += retries
	t.Conflicts += conflicts
	r.errs++
	r.retries += retries
	r.conflicts += conflicts
}

// skip records an open-loop transaction that was never sent, with the
// latency it would at least have had: in the overall latency (see all)
// and the second's, not in any type's (none was chosen) nor in the
// commits.
func (r *recorder) skip(latencyNs int64, measured bool) {
	us := micros(latencyNs)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.sec.RecordValue(us)
	if measured {
		_ = r.skippedHist.RecordValue(us)
	}
}

// all is the overall latency of the measure phase: every type's commits
// and the skipped transactions. It is merged once at the end rather than
// recorded with each commit (a third of the recorder's cost per
// transaction).
func (r *recorder) all() *hdrhistogram.Histogram {
	h := stats.NewLatencyHist()
	for _, t := range r.types {
		h.Merge(t.hist)
	}
	h.Merge(r.skippedHist)
	return h
}

func (r *recorder) behind(lateNs int64, measured bool) {
	if !measured {
		return
	}
	r.mu.Lock()
	_ = r.behindHist.RecordValue(micros(lateNs))
	r.mu.Unlock()
}

// closeSecond ends second sec of the series.
func (r *recorder) closeSecond(sec int, phase string) Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := stats.FromMicros(r.sec)
	s := Second{T: sec, Phase: phase, Commits: r.secOK, Errors: r.secErr, P50Ms: p.P50, P99Ms: p.P99, MaxMs: p.Max}
	r.series = append(r.series, s)
	r.sec.Reset()
	r.secOK, r.secErr = 0, 0
	return s
}

func (r *recorder) lastError() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

func (r *recorder) result(d *run) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	secs := d.measureSeconds()
	all := r.all()
	res := &Result{
		MeasureSeconds: secs,
		Transactions:   r.committed,
		RowsChanged:    r.rows,
		Errors:         r.errs,
		Retries:        r.retries,
		Conflicts:      r.conflicts,
		CommitLatency:  stats.FromMicros(all),
		Types:          map[string]*TypeResult{},
		Series:         append([]Second(nil), r.series...),
		Hist:           all,
	}
	if secs > 0 {
		res.TPS = float64(r.committed) / secs
		res.TPM = res.TPS * 60
	}
	for i, t := range r.types {
		t.LatencyMs = stats.FromMicros(t.hist)
		res.Types[r.names[i]] = t
	}
	return res
}

// Hist is the type's latency histogram (µs, measure phase).
func (t *TypeResult) Hist() *hdrhistogram.Histogram { return t.hist }

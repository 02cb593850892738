package runner

import (
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"

	hcheck "replab/internal/check"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/report"
	"replab/internal/workload"
)

// Stale reads (issue 32, docs/metrics.md stale_reads): once the history
// is checked, each node's reads of the measure phase against the writes
// acknowledged before them, and at each replica the prediction from the
// lag the probe measured there (its results' histogram).

// staleReads fills the summary's stale_reads from dir's history and
// writes stale_reads.csv. Nothing here fails the run.
func (r *run) staleReads(dir *report.Dir) {
	st := &report.StaleReads{Roles: map[string]string{}}
	ops, _, err := history.Read(dir.File(history.FileName))
	if err != nil {
		st.Error = err.Error()
		r.sum.StaleReads = st
		return
	}
	from := r.res.StartNs + r.s.Run.Warmup.Nanoseconds()
	to := from + int64(r.res.MeasureSeconds*1e9)
	opts := hcheck.StaleOptions{From: from, To: to, Origin: r.res.StartNs, Lag: map[string]hcheck.LagDist{}, LagBias: map[string]int64{}, LagSlack: map[string]int64{}}
	results := r.probe.Results()
	for _, n := range r.nodes {
		// Every node watched for lag (replicas; in multi-master, the
		// masters, for the other masters' writes).
		if h := r.lagHist["lag_"+n.Name]; h != nil && h.TotalCount() > 0 {
			opts.Lag[n.Name] = lagDist(h)
			// The probe's lags are upper bounds: on average half an
			// interval plus a poll above the truth (lagprobe.Result).
			lr := results[n.Name]
			opts.LagBias[n.Name] = int64((lr.ResolutionMs/2 + lr.PollP50Ms) * 1e6)
			opts.LagSlack[n.Name] = int64((lr.IntervalP99Ms + lr.PollP99Ms) * 1e6)
		}
	}
	if len(r.s.Clients) > 0 {
		procUser := r.res.ProcUser
		opts.GroupOf = func(p int) string {
			if p < 0 || p >= len(procUser) || procUser[p] < 0 {
				return ""
			}
			if cl := r.s.ClientOf(procUser[p]); cl != nil {
				return cl.Name
			}
			return ""
		}
	}
	res := hcheck.StaleReads(ops, opts)
	for name, g := range res.Groups {
		if cs := r.sum.Clients[name]; cs != nil {
			cs.StaleReads = g
		}
	}
	st.Nodes, st.Unlisted = res.Nodes, res.Unlisted
	for _, n := range r.sources {
		st.Roles[n.Name] = "source"
	}
	for _, n := range r.replicas {
		if _, src := st.Roles[n.Name]; !src {
			st.Roles[n.Name] = "replica"
		}
	}
	for n := range st.Nodes {
		if st.Roles[n] == "" {
			st.Roles[n] = "other"
		}
	}
	for n := range st.Roles {
		if st.Nodes[n] == nil {
			delete(st.Roles, n)
		}
	}
	if len(opts.Lag) > 0 {
		st.LagSampleEvery = r.res.LagSampleEvery
	}
	r.sum.StaleReads = st
	if err := dir.WriteStaleReads(res.Reads); err != nil {
		fmt.Fprintf(r.log, "warning: %s: %v\n", report.StaleReadsFile, err)
	}
}

// lagDist is a replica's lag distribution from the probe's histogram (µs):
// each bucket's highest equivalent value, in ns, with its count.
func lagDist(h *hdrhistogram.Histogram) *hcheck.Weighted {
	var vals, counts []int64
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			vals = append(vals, b.To*1000)
			counts = append(counts, b.Count)
		}
	}
	return hcheck.NewWeighted(vals, counts)
}

// readFence gives the driver the cluster's engine.ReadFence when a
// transaction type waits for its user's own writes (read_wait =
// "own-writes"); an engine without one cannot run such a workload.
func (r *run) readFence(cfg *driver.Config, types []workload.TxType) error {
	need := false
	for _, t := range types {
		need = need || t.WaitOwnWrites
	}
	if !need {
		return nil
	}
	f, ok := r.cluster.(engine.ReadFence)
	if !ok {
		return fmt.Errorf("workload %s waits at replicas for each user's own writes (read_wait = \"own-writes\"), and engine %s cannot (no commit positions to wait for): leave read_wait out", r.wl.Name(), r.eng.Kind())
	}
	cfg.Fence = f
	return nil
}

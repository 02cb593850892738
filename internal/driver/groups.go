package driver

import (
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/stats"
	"replab/internal/workload"
)

// Groups of users (issue 32: users in several regions, spec [[client]]):
// each user may belong to a group that runs only some of the workload's
// transaction types (Config.Runs), at places of its own (Config.Place),
// and is measured on its own as well as in the run's totals.

// GroupResult is one group's measure phase.
type GroupResult struct {
	Users         int                          `json:"users"`
	Transactions  int64                        `json:"transactions"`
	TPS           float64                      `json:"tps"`
	Errors        int64                        `json:"errors"`
	CommitLatency stats.Percentiles            `json:"commit_latency_ms"`
	Types         map[string]stats.Percentiles `json:"types,omitempty"`
}

type groupRec struct {
	users  int
	count  int64
	errs   int64
	hist   *hdrhistogram.Histogram
	byType map[int]*hdrhistogram.Histogram
}

type groups struct {
	mu   sync.Mutex
	of   []int // user → group index; nil without groups
	recs []*groupRec
	name []string
}

// newGroups places users in the groups Config.Group names.
func newGroups(cfg Config) *groups {
	g := &groups{}
	if cfg.Group == nil {
		return g
	}
	idx := map[string]int{}
	for u := range cfg.Users {
		name := cfg.Group(u)
		i, ok := idx[name]
		if !ok {
			i = len(g.recs)
			idx[name] = i
			g.name = append(g.name, name)
			g.recs = append(g.recs, &groupRec{hist: stats.NewLatencyHist(), byType: map[int]*hdrhistogram.Histogram{}})
		}
		g.of = append(g.of, i)
		g.recs[i].users++
	}
	return g
}

func (g *groups) commit(user, ti int, measured bool, latencyNs int64) {
	if g.of == nil || !measured {
		return
	}
	r := g.recs[g.of[user]]
	g.mu.Lock()
	defer g.mu.Unlock()
	r.count++
	us := micros(latencyNs)
	_ = r.hist.RecordValue(us)
	h := r.byType[ti]
	if h == nil {
		h = stats.NewLatencyHist()
		r.byType[ti] = h
	}
	_ = h.RecordValue(us)
}

func (g *groups) fail(user int, measured bool) {
	if g.of == nil || !measured {
		return
	}
	g.mu.Lock()
	g.recs[g.of[user]].errs++
	g.mu.Unlock()
}

func (g *groups) result(types []workload.TxType, measureS float64) map[string]*GroupResult {
	if g.of == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]*GroupResult{}
	for i, r := range g.recs {
		gr := &GroupResult{Users: r.users, Transactions: r.count, Errors: r.errs, CommitLatency: stats.FromMicros(r.hist)}
		if measureS > 0 {
			gr.TPS = float64(r.count) / measureS
		}
		for ti, h := range r.byType {
			if gr.Types == nil {
				gr.Types = map[string]stats.Percentiles{}
			}
			gr.Types[types[ti].Name] = stats.FromMicros(h)
		}
		out[g.name[i]] = gr
	}
	return out
}

// pick draws the user's next transaction type among those it runs.
func (u *user) pick() int {
	if u.runs == nil {
		return workload.Pick(u.d.types, u.r)
	}
	return u.runs[workload.Pick(u.mine, u.r)]
}

// fail counts a failed transaction in the run's totals and the user's
// group.
func (u *user) fail(ti int, measured bool, now int64, kind string, err error, retries, conflicts int64) {
	u.d.rec.fail(ti, measured, now, kind, err, retries, conflicts)
	u.d.groups.fail(u.id, measured)
}

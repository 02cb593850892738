package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"replab/internal/lab"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/units"
)

// search measures the same lab at each step of load in turn — more users,
// or a higher open-loop rate — until a step is exhausted (spec.Search),
// each step into step-NN/ (with repetitions, each step repeated); with
// search_refine, it then bisects the load between the knee and the
// exhaust point, each probe into refine-NN/ (refine.go). It keeps
// search.json up to date after every step and probe, and returns the
// summary of the final knee — the highest load that still scaled — with
// the search in it.
func (r *run) search(ctx context.Context, dir *report.Dir) (*report.Summary, error) {
	base := r.s.Run
	defer func() { r.s.Run = base }()
	sr := newSearch(base.Search)
	var sums []*report.Summary
	var runErr error
	for i, load := range base.Search.Steps {
		if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		name := fmt.Sprintf("step-%02d", i+1)
		fmt.Fprintf(r.log, "\n=== search step %d of %d: %s\n", i+1, len(base.Search.Steps), loadText(base.Search.By, load))
		var prev *report.SearchStep
		if n := len(sr.Steps); n > 0 {
			prev = &sr.Steps[n-1]
		}
		st, sum, err := r.searchLoad(ctx, dir, name, load, prev)
		if st == nil {
			return nil, err
		}
		sums = append(sums, sum)
		sr.Steps = append(sr.Steps, *st)
		if werr := dir.WriteJSON("search.json", sr); werr != nil && runErr == nil {
			runErr = werr
		}
		if err != nil && ctx.Err() != nil {
			runErr = err
			break
		}
		if !st.Scales {
			break
		}
	}
	concludeSearch(sr, len(base.Search.Steps))
	var kneeSum *report.Summary
	if k := sr.KneeStep; k > 0 {
		kneeSum = sums[k-1]
	}
	if base.Search.Refine > 0 && runErr == nil && sr.KneeStep > 0 && sr.ExhaustStep > 0 {
		var err error
		if kneeSum, err = r.refine(ctx, dir, sr, base.Search.Refine, kneeSum); err != nil {
			runErr = err
		}
	}
	if err := dir.WriteJSON("search.json", sr); err != nil && runErr == nil {
		runErr = err
	}
	fmt.Fprintf(r.log, "\nsearch: %d steps measured", len(sr.Steps))
	if len(sr.Refine) > 0 {
		fmt.Fprintf(r.log, " and %d probes between them", len(sr.Refine))
	}
	fmt.Fprintln(r.log)

	// The directory's summary is the knee's (a sweep's table shows it),
	// with the whole search in it; the steps keep their own series.
	out := &report.Summary{Kind: "search", Name: r.s.Lab.Name, Complete: false, StopReason: "no step completed"}
	if kneeSum != nil {
		c := *kneeSum
		out = &c
	}
	out.Search = sr
	r.s.Run = base
	if runErr != nil {
		out.Complete, out.StopReason = false, stopReason(ctx, runErr)
	}
	r.res, r.probe, r.lagHist = nil, nil, nil
	return out, errors.Join(runErr, r.writeAll(dir, out))
}

// searchLoad measures one load — a step, or a probe between the knee and
// the exhaust point — into dir/name (repeated with repetitions) and judges
// it against prev, the step before or the knee (nil: none). A nil step
// means its directory could not be made; otherwise err is the run's.
func (r *run) searchLoad(ctx context.Context, dir *report.Dir, name string, load float64, prev *report.SearchStep) (*report.SearchStep, *report.Summary, error) {
	sp := r.s.Run.Search
	if sp.By == spec.SearchUsers {
		r.s.Run.Users = int(load)
	} else {
		r.s.Run.RatePerSec = load
	}
	sd, err := report.NewDir(filepath.Join(dir.Path, name), "")
	if err != nil {
		return nil, nil, err
	}
	cpu0, wall0, thr0 := processCPU(), time.Now(), r.throttles()
	sum, err := r.measureInto(ctx, sd)
	client := 0.0
	if wall := time.Since(wall0).Seconds(); wall > 0 {
		client = (processCPU() - cpu0).Seconds() / wall
	}
	throttled := throttledShares(thr0, r.throttles())
	st := judgeStep(newSearch(sp), prev, load, name, sum, err)
	st.Resources = resources(sum, r.s, client, runtime.NumCPU(), throttled)
	return &st, sum, err
}

func newSearch(s *spec.Search) *report.Search {
	sr := &report.Search{By: s.By, MinEfficiency: s.MinEfficiency, MaxErrorPct: s.MaxErrorPct, Steps: []report.SearchStep{}}
	if s.MaxP99 > 0 {
		sr.MaxP99Ms = float64(s.MaxP99) / 1e6
	}
	return sr
}

func loadText(by string, load float64) string {
	if by == spec.SearchUsers {
		return fmt.Sprintf("%.0f users", load)
	}
	return fmt.Sprintf("%g transactions/s", load)
}

// judgeStep applies the rule to one step (or probe): it scales unless it
// did not complete, failed more than MaxErrorPct of its transactions,
// passed the latency bound, or raised throughput by less than
// MinEfficiency of the load's relative rise over prev — the step before,
// or for a probe the knee (nil: none).
func judgeStep(sr *report.Search, prev *report.SearchStep, load float64, dir string, sum *report.Summary, err error) report.SearchStep {
	st := report.SearchStep{Load: load, Dir: dir, Scales: true}
	if sum != nil {
		st.Complete = sum.Complete
		st.TPS, st.TPM, st.CommitP99Ms = sum.TPS, sum.TPM, sum.CommitLatency.P99
		if n := sum.Transactions + sum.Errors; n > 0 {
			st.ErrorPct = 100 * float64(sum.Errors) / float64(n)
		}
	}
	if prev != nil && prev.TPS > 0 && load > prev.Load {
		e := (st.TPS/prev.TPS - 1) / (load/prev.Load - 1)
		e = math.Round(e*1000) / 1000
		st.Efficiency = &e
	}
	switch {
	case err != nil || sum == nil || !sum.Complete:
		reason := "the run did not complete"
		if sum != nil && sum.StopReason != "" {
			reason += ": " + sum.StopReason
		} else if err != nil {
			reason += ": " + err.Error()
		}
		st.Scales, st.Why = false, reason
	case st.ErrorPct > sr.MaxErrorPct:
		st.Scales, st.Why = false, fmt.Sprintf("errors appeared: %.2f %% of transactions failed (more than %g %%)", st.ErrorPct, sr.MaxErrorPct)
	case sr.MaxP99Ms > 0 && st.CommitP99Ms > sr.MaxP99Ms:
		st.Scales, st.Why = false, fmt.Sprintf("commit latency p99 %.1f ms passed the bound of %g ms", st.CommitP99Ms, sr.MaxP99Ms)
	case st.Efficiency != nil && *st.Efficiency < sr.MinEfficiency:
		st.Scales, st.Why = false, fmt.Sprintf("throughput stopped rising: %.1f tps after %.1f, %.0f %% of the load's rise of %.0f %% (less than %.0f %%)",
			st.TPS, prev.TPS, 100**st.Efficiency, 100*(load/prev.Load-1), 100*sr.MinEfficiency)
	}
	return st
}

// concludeSearch names the knee, the exhaust point and what ran out.
func concludeSearch(sr *report.Search, planned int) {
	sr.KneeStep, sr.ExhaustStep = 0, 0
	for i, st := range sr.Steps {
		if !st.Scales {
			sr.ExhaustStep = i + 1
			break
		}
		sr.KneeStep = i + 1
	}
	sr.Complete = sr.ExhaustStep > 0 || len(sr.Steps) == planned
	sr.KneeLoad, sr.ExhaustLoad = 0, 0
	if sr.KneeStep > 0 {
		sr.KneeLoad = sr.Steps[sr.KneeStep-1].Load
	}
	if sr.ExhaustStep == 0 {
		return
	}
	st := sr.Steps[sr.ExhaustStep-1]
	sr.ExhaustLoad = st.Load
	sr.Why = st.Why
	sr.Resource = ranOut(st.Resources)
}

// ranOut names the busiest resource, as run out when it is near its
// limit.
func ranOut(res []report.Resource) string {
	if len(res) == 0 {
		return ""
	}
	top := res[0]
	if top.Used >= resourceFull {
		return fmt.Sprintf("%s: %s", top.What, top.Detail)
	}
	return fmt.Sprintf("none near its limit; the busiest: %s: %s", top.What, top.Detail)
}

// resourceFull is the share of a resource above which it counts as run
// out: averages over a phase hide the seconds at 100 %.
const resourceFull = 0.85

// throttles reads every cpu-limited site's cgroup counters.
func (r *run) throttles() map[string]lab.CPUThrottle {
	out := map[string]lab.CPUThrottle{}
	for _, st := range r.s.Sites {
		if st.CPUCores <= 0 || r.lab == nil {
			continue
		}
		if site := r.lab.Site(st.Name); site != nil {
			if t, ok := site.CPUThrottle(); ok {
				out[st.Name] = t
			}
		}
	}
	return out
}

// throttledShares is, per site, the share of its CFS periods in which it
// used up its quota between two readings.
func throttledShares(before, after map[string]lab.CPUThrottle) map[string]float64 {
	out := map[string]float64{}
	for site, a := range after {
		b := before[site]
		if p := a.Periods - b.Periods; p > 0 {
			out[site] = float64(a.Throttled-b.Throttled) / float64(p)
		}
	}
	return out
}

// resources lists what the step used of each limited resource, the
// busiest first: each site's CPU (its cpu limit, or the machine's cores),
// the machine's CPU (servers and replab itself: driver, link emulator,
// monitors), each rate-limited link direction, and each node's I/O wait.
// A cpu-limited site's use is the larger of its processes' cores over its
// limit (sampled per process by the monitors, which miss short-lived
// ones) and the share of its cgroup's periods in which the limit held it
// back (throttled).
func resources(sum *report.Summary, s *spec.Spec, clientCores float64, cores int, throttled map[string]float64) []report.Resource {
	if sum == nil {
		return nil
	}
	var out []report.Resource
	siteOf := map[string]string{}
	for _, n := range s.Nodes {
		siteOf[n.Name] = n.Site
	}
	siteCores := map[string]float64{}
	var servers float64
	measureS := s.Run.Duration.Seconds()
	for _, node := range slices.Sorted(maps.Keys(sum.Roles)) {
		var used, iowait float64
		for _, rs := range sum.Roles[node] {
			used += rs.CPUCores
			iowait += rs.IOWaitS
		}
		// A node's storage processes (roles of "NODE/storage") run in
		// its site too.
		owner, _, _ := strings.Cut(node, "/")
		siteCores[siteOf[owner]] += used
		servers += used
		if sum.IOWaitMeasured && measureS > 0 {
			w := iowait / measureS
			out = append(out, report.Resource{What: "io wait at node " + node, Used: w,
				Detail: fmt.Sprintf("%.2f s of I/O wait per second (1: a process always waiting)", w)})
		}
	}
	for _, st := range s.Sites {
		used, ok := siteCores[st.Name]
		if !ok {
			continue
		}
		limit, how := float64(cores), "the machine's"
		if st.CPUCores > 0 {
			limit, how = st.CPUCores, "its limit of"
		}
		res := report.Resource{What: "cpu at site " + st.Name, Used: used / limit,
			Detail: fmt.Sprintf("%.2f cores of %s %g", used, how, limit)}
		if th, ok := throttled[st.Name]; ok {
			res.Used = max(res.Used, th)
			res.Detail += fmt.Sprintf(", held back by it in %.0f %% of periods", 100*th)
		}
		out = append(out, res)
	}
	switch m := sum.Machine; {
	case m != nil && m.Cores > 0:
		// Measured: every process of the machine, other work included; a
		// step the machine bound counts as its resource run out.
		used := m.BusyMeanPct / 100
		if m.Bound {
			used = max(used, resourceFull)
		}
		out = append(out, report.Resource{What: "the machine's cpu", Used: used,
			Detail: fmt.Sprintf("%.0f %% of %d cores busy, every core for %.0f of %.0f s: servers %.2f, replab (driver, links, monitors) %.2f, other work %.2f",
				m.BusyMeanPct, m.Cores, m.BusySeconds, m.Seconds, m.ServerCores, m.ReplabCores, m.OtherCores)})
	case cores > 0:
		all := servers + clientCores
		out = append(out, report.Resource{What: "the machine's cpu", Used: all / float64(cores),
			Detail: fmt.Sprintf("%.2f of %d cores: servers %.2f, replab (driver, links, monitors) %.2f", all, cores, servers, clientCores)})
	}
	for _, l := range slices.Sorted(maps.Keys(sum.Links)) {
		ls := sum.Links[l]
		if ls.UtilizationAvgPct == nil {
			continue
		}
		u := *ls.UtilizationAvgPct / 100
		out = append(out, report.Resource{What: "link " + l, Used: u,
			Detail: fmt.Sprintf("%.0f %% of %s on average", 100*u, units.Bits(float64(ls.RateBps)))})
	}
	slices.SortStableFunc(out, func(a, b report.Resource) int {
		switch {
		case a.Used > b.Used:
			return -1
		case a.Used < b.Used:
			return 1
		}
		return 0
	})
	for i := range out {
		out[i].Used = math.Round(out[i].Used*1000) / 1000
	}
	return out
}

// processCPU is the CPU time replab's own process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

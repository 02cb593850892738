package runner

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/driver"
	"replab/internal/lagprobe"
	"replab/internal/report"
	"replab/internal/spec"
)

// Filling the summary of a measurement from what the driver, the lag
// probe and the monitors measured, and writing the results directory.

func (r *run) newSummary() *report.Summary {
	sum := &report.Summary{
		Kind: "run", Name: r.s.Lab.Name, Started: time.Now().UTC(), SpecFile: r.s.File, Engine: r.eng.Kind(),
		Scheme: r.s.Scheme.Replication, Workload: r.s.Workload.Kind, Replicas: map[string]*report.Replica{},
		SetupS: r.setupS, Load: r.loaded, Environment: r.env, Provision: r.provision(),
	}
	if sum.Scheme == "" {
		sum.Scheme = "default"
	}
	return sum
}

func (r *run) fillDriver() {
	res := r.res
	s := r.sum
	s.Complete, s.StopReason = res.Complete, res.StopReason
	s.Mode, s.Users, s.TargetRate, s.MeasureSeconds = res.Mode, res.Users, res.TargetRate, res.MeasureSeconds
	s.TransactionsTarget, s.TransactionsDone = res.TransactionsTarget, res.TransactionsDone
	s.TPM, s.TPS, s.Transactions, s.RowsChanged = res.TPM, res.TPS, res.Transactions, res.RowsChanged
	s.Errors, s.Retries, s.Conflicts, s.CommitLatency, s.Types = res.Errors, res.Retries, res.Conflicts, res.CommitLatency, res.Types
	s.BehindScheduleMs, s.Skipped, s.SkippedLatencyMs = res.BehindScheduleMs, res.Skipped, res.SkippedLatencyMs
	// The stamps' sample actually used (chosen by the driver when
	// automatic); by position every transaction is measured.
	for _, rep := range s.Replicas {
		if rep.LagMethod == lagprobe.MethodPositions {
			continue
		}
		rep.SampleEvery = res.LagSampleEvery
		if res.LagSampleAuto {
			rep.SampleBudgetPerS = res.LagBudgetPerS
		}
	}
}

// newReplica is a replica's summary before the driver ran: its lag
// method and, for stamps, the sample as the spec states it (SampleEvery
// 0 until an automatic one is chosen).
func (r *run) newReplica(name, site string) *report.Replica {
	method, position := r.lagMethodOf(name)
	rep := &report.Replica{Site: site, LagMethod: method, LagPosition: position, SampleEvery: r.s.Run.LagSample, Sample: "fixed"}
	switch {
	case method == lagprobe.MethodPositions:
		rep.SampleEvery, rep.Sample = 1, "all"
	case r.s.Run.LagSample == spec.LagSampleAuto || r.s.Run.LagSample == spec.LagSampleAll:
		rep.SampleEvery, rep.Sample, rep.SampleBudgetPerS = 0, "auto", driver.DefaultLagBudget
	}
	return rep
}

func (r *run) fillLag() {
	r.lagHist = map[string]*hdrhistogram.Histogram{}
	results := r.probe.Results()
	for name, rep := range r.sum.Replicas {
		lr, ok := results[name]
		if !ok {
			continue
		}
		rep.LagMs, rep.LagMinMs = lr.LagMs, lr.LagMinMs
		rep.NotVisibleAtEnd = lr.NotVisibleAtEnd
		rep.Tracked = lr.Tracked
		rep.ResolutionMs = lr.ResolutionMs
		rep.PollP99Ms = lr.PollP99Ms
		rep.Polls, rep.FloorMs, rep.WindowHits = lr.Polls, lr.FloorMs, lr.WindowHits
		rep.VisibleBeforeWatch = lr.VisibleBeforeWatch
		rep.Unpositioned = lr.Unpositioned + lr.Truncated
		switch {
		case lr.CatchUpNs < 0:
			waited := r.catchUpTimeout().Seconds()
			rep.NotCaughtUpS = &waited
		case lr.CatchUpNs > 0:
			cu := float64(lr.CatchUpNs) / 1e6
			rep.CatchUpMs = &cu
		}
		r.lagHist["lag_"+name] = lr.Histogram
	}
}

// writeAll writes one measurement's results into dir.
func (r *run) writeAll(dir *report.Dir, sum *report.Summary) error {
	var errs []error
	if r.res != nil {
		errs = append(errs, dir.WriteSeries(r.res.Series))
		hists := map[string]*hdrhistogram.Histogram{"commit_latency": r.res.Hist}
		for name, t := range r.res.Types {
			hists["type_"+name] = t.Hist()
		}
		for k, h := range r.lagHist {
			hists[k] = h
		}
		errs = append(errs, dir.WriteHistLog("latency.hlog", hists))
	}
	if r.probe != nil {
		errs = append(errs, r.writeLagSeries(dir))
	}
	if sum.Environment.Kernel == "" {
		sum.Environment = report.CaptureEnvironment(r.opt.Version, "")
	}
	errs = append(errs, dir.WriteJSON("environment.json", sum.Environment))
	errs = append(errs, dir.WriteJSON("resolved-spec.json", r.s))
	errs = append(errs, dir.WriteJSON("summary.json", sum))
	return errors.Join(errs...)
}

func (r *run) writeLagSeries(dir *report.Dir) error {
	var b strings.Builder
	b.WriteString("t_s,replica,observed,lag_p50_ms,lag_p99_ms,lag_max_ms\n")
	results := r.probe.Results()
	reps := make([]string, 0, len(results))
	for n := range results {
		reps = append(reps, n)
	}
	sort.Strings(reps)
	for _, n := range reps {
		for _, s := range results[n].Series {
			fmt.Fprintf(&b, "%d,%s,%d,%.3f,%.3f,%.3f\n", s.Second, n, s.Count, s.P50Ms, s.P99Ms, s.MaxMs)
		}
	}
	return os.WriteFile(dir.File("lag.csv"), []byte(b.String()), 0o644)
}

// stopMonitor stops this measurement's monitors and puts their summary of
// the measure phase into r.sum: bytes and utilization per link direction,
// bytes on the wire per committed transaction, CPU and I/O wait per node
// and process role, the engine's replication state and a verdict per
// replica. Safe to call again.
func (r *run) stopMonitor() {
	if r.mon == nil {
		return
	}
	if r.res != nil {
		r.mon.SetCommitted(r.res.Transactions)
	}
	ms, err := r.mon.Stop()
	r.mon = nil
	if err != nil {
		fmt.Fprintf(r.log, "warning: %v\n", err)
	}
	for _, w := range ms.Warnings {
		fmt.Fprintf(r.log, "warning: monitors: %s\n", w)
	}
	s := r.sum
	s.Links, s.Roles, s.Replication, s.Verdicts = ms.Links, ms.Roles, ms.Replicas, ms.Verdicts
	s.Gauges = ms.Gauges
	s.Machine = ms.Machine
	s.MachineBound = ms.Machine != nil && ms.Machine.Bound
	s.IOWaitMeasured = ms.IOWaitMeasured
	s.Monitor = &report.MonitorInfo{IntervalS: ms.IntervalS, IOWaitNote: ms.IOWaitNote, Cost: ms.Cost, Warnings: ms.Warnings}
	if r.res != nil {
		s.BytesPerTransaction = ms.BytesPerTransaction(r.res.Transactions)
	}
	for name, rep := range s.Replicas {
		if rs, ok := ms.Replicas[name]; ok {
			rep.EngineReplayLagMs = rs.ReplayLagMs
			rep.EngineBytesBehind = rs.BytesBehindMax
			rep.EngineBacklogMax, rep.EngineBacklogUnit = rs.BacklogMax, rs.BacklogUnit
		}
	}
}

// provision says over which links the lab was built: "link" or "fast".
func (r *run) provision() string {
	if r.fast {
		return spec.ProvisionFast
	}
	return spec.ProvisionLink
}

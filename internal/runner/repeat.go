package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"replab/internal/report"
	"replab/internal/stats"
)

// repeat measures the same lab several times: rs.Repetitions, or, with a
// confidence target, a pilot of that many and then as many as Jain's
// formula asks for (up to MaxRepetitions). Each measurement goes to
// rep-NN/; the aggregate to dir/summary.json.
func (r *run) repeat(ctx context.Context, dir *report.Dir) (*report.Summary, error) {
	rs := r.s.Run
	target := rs.Repetitions
	var sums []*report.Summary
	var dirs []string
	var runErr error
	needed := 0
	for i := 1; i <= target; i++ {
		name := fmt.Sprintf("rep-%02d", i)
		rd, err := report.NewDir(filepath.Join(dir.Path, name), "")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(r.log, "repetition %d of %d\n", i, target)
		sum, err := r.measure(ctx, rd)
		if werr := r.writeAll(rd, sum); werr != nil && err == nil {
			err = werr
		}
		sums = append(sums, sum)
		dirs = append(dirs, name)
		if err != nil {
			runErr = fmt.Errorf("repetition %d: %w", i, err)
			break
		}
		if i == rs.Repetitions && rs.Confidence > 0 {
			needed = stats.RepetitionsNeeded(tpms(sums), rs.Confidence, rs.RelativeError)
			target = min(max(needed, rs.Repetitions), rs.MaxRepetitions)
			fmt.Fprintf(r.log, "pilot of %d: tpm %.0f ± %.1f%%; %d repetitions reach ±%.0f%% at %.0f%% confidence; running %d\n",
				i, stats.MeanCI(tpms(sums), rs.Confidence).Mean, relHalf(stats.MeanCI(tpms(sums), rs.Confidence)),
				needed, 100*rs.RelativeError, 100*rs.Confidence, target)
		}
	}
	agg := aggregate(sums, dirs, level(rs.Confidence))
	agg.RepetitionsNeeded = needed
	if runErr != nil {
		agg.Complete = false
		agg.StopReason = stopReason(ctx, runErr)
	}
	r.res, r.probe, r.lagHist = nil, nil, nil // the aggregate has no series of its own
	if err := r.writeAll(dir, agg); err != nil && runErr == nil {
		runErr = err
	}
	return agg, runErr
}

func level(conf float64) float64 {
	if conf == 0 {
		return 0.95
	}
	return conf
}

func tpms(sums []*report.Summary) []float64 {
	var x []float64
	for _, s := range sums {
		if s.Complete {
			x = append(x, s.TPM)
		}
	}
	return x
}

func relHalf(ci stats.CI) float64 {
	if ci.Mean == 0 {
		return 0
	}
	return 100 * ci.HalfWidth / ci.Mean
}

// aggregate summarises repetitions: headline figures are means over the
// complete repetitions, each with a confidence interval.
func aggregate(sums []*report.Summary, dirs []string, lvl float64) *report.Summary {
	last := sums[len(sums)-1]
	agg := *last
	agg.Kind = "repetitions"
	agg.Complete = true
	agg.Types = nil
	agg.CI = map[string]stats.CI{}
	agg.Replicas = map[string]*report.Replica{}
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	var complete []*report.Summary
	for i, s := range sums {
		rep := report.Repetition{Dir: dirs[i], Complete: s.Complete, TPM: s.TPM, CommitP99Ms: s.CommitLatency.P99, Transactions: s.Transactions, LagP50Ms: map[string]float64{}}
		for n, rr := range s.Replicas {
			rep.LagP50Ms[n] = rr.LagMs.P50
			rep.LagSampleEvery = rr.SampleEvery
		}
		agg.Repetitions = append(agg.Repetitions, rep)
		if !s.Complete {
			agg.Complete = false
			agg.StopReason = "repetition " + dirs[i] + ": " + s.StopReason
			continue
		}
		complete = append(complete, s)
		add("tpm", s.TPM)
		add("tps", s.TPS)
		add("commit_latency_ms.p50", s.CommitLatency.P50)
		add("commit_latency_ms.p95", s.CommitLatency.P95)
		add("commit_latency_ms.p99", s.CommitLatency.P99)
		add("commit_latency_ms.max", s.CommitLatency.Max)
		add("bytes_per_transaction", s.BytesPerTransaction)
		for k, l := range s.Links {
			add("links."+k+".bytes", float64(l.Bytes))
			if l.UtilizationAvgPct != nil {
				add("links."+k+".utilization_avg_pct", *l.UtilizationAvgPct)
			}
		}
		for n, rr := range s.Replicas {
			add("replicas."+n+".lag_ms.p50", rr.LagMs.P50)
			add("replicas."+n+".lag_ms.p95", rr.LagMs.P95)
			add("replicas."+n+".lag_ms.p99", rr.LagMs.P99)
			add("replicas."+n+".lag_ms.max", rr.LagMs.Max)
		}
	}
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		agg.CI[k] = stats.MeanCI(series[k], lvl)
	}
	if ci, ok := agg.CI["tpm"]; ok {
		agg.TPMCI = &ci
		agg.TPM = ci.Mean
		agg.TPS = agg.CI["tps"].Mean
		agg.CommitLatency.P50 = agg.CI["commit_latency_ms.p50"].Mean
		agg.CommitLatency.P95 = agg.CI["commit_latency_ms.p95"].Mean
		agg.CommitLatency.P99 = agg.CI["commit_latency_ms.p99"].Mean
		agg.CommitLatency.Max = agg.CI["commit_latency_ms.max"].Mean
		agg.BytesPerTransaction = agg.CI["bytes_per_transaction"].Mean
	}
	var tx, rows, errs, retries int64
	for _, s := range complete {
		tx += s.Transactions
		rows += s.RowsChanged
		errs += s.Errors
		retries += s.Retries
		for n, rr := range s.Replicas {
			a := agg.Replicas[n]
			if a == nil {
				a = &report.Replica{Site: rr.Site, ResolutionMs: rr.ResolutionMs, SampleEvery: rr.SampleEvery,
					Sample: rr.Sample, SampleBudgetPerS: rr.SampleBudgetPerS}
				agg.Replicas[n] = a
			}
			if a.SampleEvery != rr.SampleEvery {
				a.SampleEvery = 0 // differs by repetition: see Repetitions
			}
			a.NotVisibleAtEnd += rr.NotVisibleAtEnd
			a.Tracked += rr.Tracked
		}
	}
	for n, a := range agg.Replicas {
		a.LagMs.P50 = agg.CI["replicas."+n+".lag_ms.p50"].Mean
		a.LagMs.P95 = agg.CI["replicas."+n+".lag_ms.p95"].Mean
		a.LagMs.P99 = agg.CI["replicas."+n+".lag_ms.p99"].Mean
		a.LagMs.Max = agg.CI["replicas."+n+".lag_ms.max"].Mean
	}
	agg.Transactions, agg.RowsChanged, agg.Errors, agg.Retries = tx, rows, errs, retries
	if len(complete) > 0 {
		agg.MeasureSeconds = last.MeasureSeconds * float64(len(complete))
	}
	return &agg
}

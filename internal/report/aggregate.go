package report

import (
	"sort"

	"replab/internal/stats"
)

// Aggregate summarises repetitions: headline figures are means over the
// complete repetitions, each with a confidence interval.
func Aggregate(sums []*Summary, dirs []string, lvl float64) *Summary {
	last := sums[len(sums)-1]
	agg := *last
	agg.Kind = "repetitions"
	agg.Complete = true
	agg.Types = nil
	agg.CI = map[string]stats.CI{}
	agg.Replicas = map[string]*Replica{}
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	var complete []*Summary
	for i, s := range sums {
		rep := Repetition{Dir: dirs[i], Complete: s.Complete, TPM: s.TPM, CommitP99Ms: s.CommitLatency.P99, Transactions: s.Transactions, LagP50Ms: map[string]float64{}}
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
				a = &Replica{Site: rr.Site, ResolutionMs: rr.ResolutionMs, SampleEvery: rr.SampleEvery,
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

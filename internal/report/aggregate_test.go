package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"replab/internal/driver"
	"replab/internal/monitor"
	"replab/internal/stats"
)

// repSums reads testdata/dir's repetitions' summaries.
func repSums(t *testing.T, dir string) ([]*Summary, []string) {
	t.Helper()
	var sums []*Summary
	var dirs []string
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("rep-%02d", i)
		var s Summary
		readJSON(t, filepath.Join("testdata", dir, name, "summary.json"), &s)
		sums = append(sums, &s)
		dirs = append(dirs, name)
	}
	return sums, dirs
}

// encode writes s as Dir.WriteJSON does.
func encode(t *testing.T, s *Summary) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The aggregate of the testdata repetitions, as summary.json and as the
// end-of-run table, pinned.
func TestAggregateGolden(t *testing.T) {
	for _, dir := range []string{"reps-async", "reps-sync"} {
		t.Run(dir, func(t *testing.T) {
			sums, dirs := repSums(t, dir)
			agg := Aggregate(sums, dirs, 0.95)
			golden(t, "aggregate-"+dir+".json.golden", encode(t, agg))
			var b bytes.Buffer
			PrintSummary(&b, agg)
			golden(t, "aggregate-"+dir+".golden", b.Bytes())
		})
	}
}

// Every number in the aggregate's summary.json is the mean of the
// repetitions' (with its CI under the same path), their sum, or the
// configuration they share: none is one repetition's value alone. The
// aggregate replab wrote before (testdata/DIR/summary.json) fails this.
func TestAggregateHasNoFigureOfOneRepetition(t *testing.T) {
	for _, dir := range []string{"reps-async", "reps-sync"} {
		t.Run(dir, func(t *testing.T) {
			sums, dirs := repSums(t, dir)
			var reps []map[string]any
			for _, s := range sums {
				var m map[string]any
				if err := json.Unmarshal(encode(t, s), &m); err != nil {
					t.Fatal(err)
				}
				reps = append(reps, m)
			}
			agg := Aggregate(sums, dirs, 0.95)
			var got map[string]any
			if err := json.Unmarshal(encode(t, agg), &got); err != nil {
				t.Fatal(err)
			}
			bad, checked := figuresOfOneRepetition(got, agg.CI, reps)
			for _, b := range bad {
				t.Error(b)
			}
			if checked < 250 {
				t.Errorf("checked only %d figures", checked)
			}

			var old map[string]any
			var oldSum Summary
			readJSON(t, filepath.Join("testdata", dir, "summary.json"), &old)
			readJSON(t, filepath.Join("testdata", dir, "summary.json"), &oldSum)
			bad, _ = figuresOfOneRepetition(old, oldSum.CI, reps)
			if !slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, "commit_latency_ms.p99_9 ") }) {
				t.Errorf("the check passes the old aggregate's p99.9 (the last repetition's): %q", bad)
			}
		})
	}
}

// figuresOfOneRepetition checks every number of an aggregate's
// summary.json against the repetitions' and returns those that are not
// their mean (with a CI of it), their sum, or the value they all share.
func figuresOfOneRepetition(agg map[string]any, ci map[string]stats.CI, reps []map[string]any) (bad []string, checked int) {
	walkNumbers(nil, agg, func(path []string, v float64) {
		switch path[0] {
		case "ci", "tpm_ci", "repetitions", "environment":
			return // the aggregate's own, and the machine the repetitions shared
		}
		key := strings.Join(path, ".")
		var xs []float64
		for _, r := range reps {
			x, ok := lookup(r, path)
			if !ok && path[0] == "roles" {
				x, ok = 0, true // a role that did not run in a repetition used nothing
			}
			if ok {
				xs = append(xs, x)
			}
		}
		checked++
		c, hasCI := ci[key]
		switch {
		case hasCI:
			m := meanOf(xs)
			if math.Abs(v-m) > 0.5+1e-9*math.Abs(m) || math.Abs(c.Mean-m) > 1e-9*math.Max(1, math.Abs(m)) || c.N != len(xs) {
				bad = append(bad, fmt.Sprintf("%s = %v, CI mean %v (n %d); the repetitions' mean is %v (n %d)", key, v, c.Mean, c.N, m, len(xs)))
			}
		case ruleFor(path) == sum:
			if s := total(xs); v != s {
				bad = append(bad, fmt.Sprintf("%s = %v, want the sum of the repetitions' %v = %v", key, v, xs, s))
			}
		default: // configuration or identity: the same in every repetition
			for i, x := range xs {
				if x != v {
					bad = append(bad, fmt.Sprintf("%s = %v has no CI and is not a sum, but repetition %d says %v", key, v, i+1, x))
					break
				}
			}
		}
	})
	slices.Sort(bad)
	return bad, checked
}

func walkNumbers(path []string, v any, f func([]string, float64)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			walkNumbers(append(slices.Clip(path), k), x, f)
		}
	case float64:
		f(path, v)
	}
}

func lookup(m map[string]any, path []string) (float64, bool) {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		if v, ok = mm[p]; !ok {
			return 0, false
		}
	}
	x, ok := v.(float64)
	return x, ok
}

func meanOf(xs []float64) float64 { return total(xs) / float64(len(xs)) }

func total(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

func ptr(v float64) *float64 { return &v }

// rep is a complete repetition with the figures a test sets.
func rep(f func(*Summary)) *Summary {
	s := &Summary{Kind: "run", Name: "t", Complete: true, Replicas: map[string]*Replica{}}
	f(s)
	return s
}

// ci95of3 is the 95 % half-width of three values with standard
// deviation sd: t(0.975, 2) · sd / √3.
func ci95of3(sd float64) float64 { return 4.302652729911275 * sd / math.Sqrt(3) }

// sdOf is the sample standard deviation.
func sdOf(xs ...float64) float64 {
	m := meanOf(xs)
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

func TestAggregateFigures(t *testing.T) {
	type check struct {
		key    string // in CI; "" checks only the value
		got    func(*Summary) float64
		want   float64 // the aggregate's value, and the CI's mean
		halfCI float64 // the CI's half-width (checked when key is set)
	}
	for _, tc := range []struct {
		name   string
		reps   []*Summary
		checks []check
	}{
		{
			name: "p99.9 of 20, 25 and 30 ms is 25 ± t·5/√3",
			reps: []*Summary{
				rep(func(s *Summary) { s.CommitLatency = stats.Percentiles{Count: 100, P999: 20, Max: 30} }),
				rep(func(s *Summary) { s.CommitLatency = stats.Percentiles{Count: 200, P999: 25, Max: 40} }),
				rep(func(s *Summary) { s.CommitLatency = stats.Percentiles{Count: 301, P999: 30, Max: 50} }),
			},
			checks: []check{
				{"commit_latency_ms.p99_9", func(s *Summary) float64 { return s.CommitLatency.P999 }, 25, ci95of3(5)},
				{"commit_latency_ms.max", func(s *Summary) float64 { return s.CommitLatency.Max }, 40, ci95of3(10)},
				// A mean count is stored rounded (200.33 → 200); its CI keeps the fraction.
				{"", func(s *Summary) float64 { return float64(s.CommitLatency.Count) }, 200, math.NaN()},
				{"commit_latency_ms.count", func(s *Summary) float64 { return s.CI["commit_latency_ms.count"].Mean }, 601.0 / 3, ci95of3(sdOf(100, 200, 301))},
			},
		},
		{
			name: "link bytes of 1000, 2000 and 3000 are 2000 ± t·1000/√3; the rate is configuration",
			reps: []*Summary{
				rep(func(s *Summary) {
					s.Links = map[string]monitor.LinkSummary{"a->b": {Bytes: 1000, RateBps: 1e6, UtilizationAvgPct: ptr(1)}}
				}),
				rep(func(s *Summary) {
					s.Links = map[string]monitor.LinkSummary{"a->b": {Bytes: 2000, RateBps: 1e6, UtilizationAvgPct: ptr(2)}}
				}),
				rep(func(s *Summary) {
					s.Links = map[string]monitor.LinkSummary{"a->b": {Bytes: 3000, RateBps: 1e6, UtilizationAvgPct: ptr(3)}}
				}),
			},
			checks: []check{
				{"links.a->b.bytes", func(s *Summary) float64 { return float64(s.Links["a->b"].Bytes) }, 2000, ci95of3(1000)},
				{"links.a->b.utilization_avg_pct", func(s *Summary) float64 { return *s.Links["a->b"].UtilizationAvgPct }, 2, ci95of3(1)},
				{"", func(s *Summary) float64 { return float64(s.Links["a->b"].RateBps) }, 1e6, math.NaN()},
			},
		},
		{
			name: "transactions, errors and retries are sums; tpm, bytes per transaction and a type's latency means",
			reps: []*Summary{
				rep(func(s *Summary) {
					s.TPM, s.Transactions, s.Errors, s.Retries, s.MeasureSeconds, s.BytesPerTransaction = 600, 60, 1, 2, 6, 1000
					s.Types = map[string]*driver.TypeResult{"u": {Count: 60, Retries: 2, Errors: map[string]int64{"40001": 1}, LatencyMs: stats.Percentiles{P99: 9}}}
				}),
				rep(func(s *Summary) {
					s.TPM, s.Transactions, s.Errors, s.Retries, s.MeasureSeconds, s.BytesPerTransaction = 900, 90, 0, 3, 6, 1100
					s.Types = map[string]*driver.TypeResult{"u": {Count: 90, Retries: 3, LatencyMs: stats.Percentiles{P99: 12}}}
				}),
				rep(func(s *Summary) {
					s.TPM, s.Transactions, s.Errors, s.Retries, s.MeasureSeconds, s.BytesPerTransaction = 1200, 120, 4, 0, 6, 1200
					s.Types = map[string]*driver.TypeResult{"u": {Count: 120, Errors: map[string]int64{"40001": 4}, LatencyMs: stats.Percentiles{P99: 15}}}
				}),
			},
			checks: []check{
				{"tpm", func(s *Summary) float64 { return s.TPM }, 900, ci95of3(300)},
				{"tpm", func(s *Summary) float64 { return s.TPMCI.Mean }, 900, ci95of3(300)},
				{"bytes_per_transaction", func(s *Summary) float64 { return s.BytesPerTransaction }, 1100, ci95of3(100)},
				{"types.u.count", func(s *Summary) float64 { return float64(s.Types["u"].Count) }, 90, ci95of3(30)},
				{"types.u.latency_ms.p99", func(s *Summary) float64 { return s.Types["u"].LatencyMs.P99 }, 12, ci95of3(3)},
				{"", func(s *Summary) float64 { return float64(s.Transactions) }, 270, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Errors) }, 5, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Retries) }, 5, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Types["u"].Errors["40001"]) }, 5, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Types["u"].Retries) }, 5, math.NaN()},
				{"", func(s *Summary) float64 { return s.MeasureSeconds }, 18, math.NaN()},
			},
		},
		{
			name: "replica lag is a mean, what was never seen a sum; a role absent from a repetition used nothing",
			reps: []*Summary{
				rep(func(s *Summary) {
					s.Replicas["r"] = &Replica{LagMs: stats.Percentiles{P50: 10, P99: 40}, NotVisibleAtEnd: 1, Tracked: 50, SampleEvery: 2}
					s.Roles = map[string]map[string]monitor.RoleSummary{"r": {"startup": {CPUS: 3}, "walreceiver": {CPUS: 1}}}
				}),
				rep(func(s *Summary) {
					s.Replicas["r"] = &Replica{LagMs: stats.Percentiles{P50: 20, P99: 50}, Tracked: 60, SampleEvery: 3}
					s.Roles = map[string]map[string]monitor.RoleSummary{"r": {"walreceiver": {CPUS: 2}}}
				}),
				rep(func(s *Summary) {
					s.Replicas["r"] = &Replica{LagMs: stats.Percentiles{P50: 30, P99: 60}, NotVisibleAtEnd: 2, Tracked: 70, SampleEvery: 2}
					s.Roles = map[string]map[string]monitor.RoleSummary{"r": {"startup": {CPUS: 3}, "walreceiver": {CPUS: 3}}}
				}),
			},
			checks: []check{
				{"replicas.r.lag_ms.p50", func(s *Summary) float64 { return s.Replicas["r"].LagMs.P50 }, 20, ci95of3(10)},
				{"replicas.r.lag_ms.p99", func(s *Summary) float64 { return s.Replicas["r"].LagMs.P99 }, 50, ci95of3(10)},
				{"", func(s *Summary) float64 { return float64(s.Replicas["r"].NotVisibleAtEnd) }, 3, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Replicas["r"].Tracked) }, 180, math.NaN()},
				// Sampled differently by repetition: 0, each in Repetitions.
				{"", func(s *Summary) float64 { return float64(s.Replicas["r"].SampleEvery) }, 0, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Repetitions[1].LagSampleEvery) }, 3, math.NaN()},
				{"roles.r.startup.cpu_s", func(s *Summary) float64 { return s.Roles["r"]["startup"].CPUS }, 2, ci95of3(math.Sqrt(3))},
				{"roles.r.walreceiver.cpu_s", func(s *Summary) float64 { return s.Roles["r"]["walreceiver"].CPUS }, 2, ci95of3(1)},
			},
		},
		{
			name: "anomalies and conflicts per 10,000 transactions are one rate per repetition; the counts sums",
			reps: []*Summary{
				rep(func(s *Summary) {
					s.Transactions = 1000
					s.Consistency = &Consistency{TransactionsChecked: 1000, Anomalies: map[string]int64{"lost-update": 1, "G2-item": 1}}
					s.ReplicationConflicts = &ReplicationConflicts{Counted: "c", Count: 10}
				}),
				rep(func(s *Summary) {
					s.Transactions = 1000
					s.Consistency = &Consistency{TransactionsChecked: 2000, Anomalies: map[string]int64{"lost-update": 4}}
					s.ReplicationConflicts = &ReplicationConflicts{Counted: "c", Count: 20}
				}),
				rep(func(s *Summary) {
					s.Transactions = 1000
					s.Consistency = &Consistency{TransactionsChecked: 1000, Anomalies: map[string]int64{"lost-update": 3, "G-single": 1}}
					s.ReplicationConflicts = &ReplicationConflicts{Counted: "c", Count: 30}
				}),
			},
			checks: []check{
				{"consistency.anomalies_per_10k", func(s *Summary) float64 { return s.CI["consistency.anomalies_per_10k"].Mean }, 80.0 / 3, ci95of3(sdOf(20, 20, 40))},
				{"consistency.lost_updates_per_10k", func(s *Summary) float64 { return s.CI["consistency.lost_updates_per_10k"].Mean }, 20, ci95of3(10)},
				{"replication_conflicts.per_10k", func(s *Summary) float64 { return s.CI["replication_conflicts.per_10k"].Mean }, 200, ci95of3(100)},
				{"", func(s *Summary) float64 { return float64(s.Consistency.Anomalies["lost-update"]) }, 8, math.NaN()},
				{"", func(s *Summary) float64 { return float64(s.Consistency.TransactionsChecked) }, 4000, math.NaN()},
			},
		},
		{
			name: "an incomplete repetition counts in no figure",
			reps: []*Summary{
				rep(func(s *Summary) { s.TPM, s.Transactions, s.CommitLatency.P999 = 100, 10, 20 }),
				rep(func(s *Summary) { s.TPM, s.Transactions, s.CommitLatency.P999 = 300, 30, 40 }),
				rep(func(s *Summary) {
					s.TPM, s.Transactions, s.CommitLatency.P999 = 5, 1, 900
					s.Complete, s.StopReason = false, "interrupted"
				}),
			},
			checks: []check{
				{"tpm", func(s *Summary) float64 { return s.TPM }, 200, 12.706204736174707 * 100},
				{"commit_latency_ms.p99_9", func(s *Summary) float64 { return s.CommitLatency.P999 }, 30, 12.706204736174707 * 10},
				{"", func(s *Summary) float64 { return float64(s.Transactions) }, 40, math.NaN()},
				{"", func(s *Summary) float64 { return float64(len(s.Repetitions)) }, 3, math.NaN()},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg := Aggregate(tc.reps, []string{"rep-01", "rep-02", "rep-03"}, 0.95)
			for _, c := range tc.checks {
				if got := c.got(agg); math.Abs(got-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) {
					t.Errorf("%s: %v, want %v", c.key, got, c.want)
				}
				ci, ok := agg.CI[c.key]
				switch {
				case c.key == "":
				case !ok:
					t.Errorf("no CI for %s", c.key)
				case ci.Level != 0.95 || math.Abs(ci.Mean-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) || math.Abs(ci.HalfWidth-c.halfCI) > 1e-6*c.halfCI:
					t.Errorf("CI of %s: %+v, want mean %v ± %v at 95 %%", c.key, ci, c.want, c.halfCI)
				}
			}
		})
	}
}

func TestAggregateWords(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reps := []*Summary{
		rep(func(s *Summary) {
			s.Started = started
			s.Verdicts = map[string]string{"r": "keeping up"}
			s.Steady = &stats.Steadiness{Steady: true}
			s.Replication = map[string]monitor.ReplicaSummary{"r": {From: "p", LagGrows: false}}
		}),
		rep(func(s *Summary) {
			s.Started = started.Add(time.Minute)
			s.Verdicts = map[string]string{"r": "cpu-bound (startup 95% of a core)"}
			s.Steady = &stats.Steadiness{Steady: false, Reason: "falls 12.0 %/min"}
			s.Replication = map[string]monitor.ReplicaSummary{"r": {From: "p", LagGrows: true}}
		}),
		rep(func(s *Summary) {
			s.Started = started.Add(2 * time.Minute)
			s.Verdicts = map[string]string{"r": "keeping up"}
			s.Steady = &stats.Steadiness{Steady: true}
			s.Replication = map[string]monitor.ReplicaSummary{"r": {From: "p", LagGrows: false}}
		}),
	}
	agg := Aggregate(reps, []string{"rep-01", "rep-02", "rep-03"}, 0.95)
	for _, c := range []struct{ what, got, want string }{
		{"verdict", agg.Verdicts["r"], "keeping up (2 of 3 repetitions), cpu-bound (1 of 3 repetitions)"},
		{"repetition 2's verdict", agg.Repetitions[1].Verdicts["r"], "cpu-bound (startup 95% of a core)"},
		{"steady", fmt.Sprint(agg.Steady.Steady), "false"},
		{"steady reason", agg.Steady.Reason, "falls 12.0 %/min (1 of 3 repetitions)"},
		{"lag grows (in any repetition)", fmt.Sprint(agg.Replication["r"].LagGrows), "true"},
		{"upstream", agg.Replication["r"].From, "p"},
		{"started (the first repetition)", agg.Started.String(), started.String()},
		{"kind", agg.Kind, "repetitions"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	reps[1].Complete, reps[1].StopReason = false, "lag watcher at r: connection refused"
	agg = Aggregate(reps, []string{"rep-01", "rep-02", "rep-03"}, 0.95)
	if agg.Complete || agg.StopReason != "repetition rep-02: lag watcher at r: connection refused" {
		t.Errorf("one incomplete repetition: complete %v, %q", agg.Complete, agg.StopReason)
	}
	if got := agg.Verdicts["r"]; got != "keeping up (2 of 2 repetitions)" {
		t.Errorf("verdict over the complete repetitions: %q", got)
	}
	agg = Aggregate([]*Summary{nil, reps[0]}, []string{"rep-01", "rep-02"}, 0.95)
	if agg.Complete || agg.StopReason != "repetition rep-01: no summary" || len(agg.Repetitions) != 2 {
		t.Errorf("a repetition without a summary: complete %v, %q, %d repetitions", agg.Complete, agg.StopReason, len(agg.Repetitions))
	}
}

package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"replab/internal/check"
	"replab/internal/stats"
)

func TestSweepTableGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sweep", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sw Sweep
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	// One failed point renders as such instead of breaking the table.
	sw.Points = append(sw.Points, SweepPoint{Label: "failed point", Values: map[string]any{}, Dir: "p99"})
	var out bytes.Buffer
	PrintSweep(&out, &sw)
	golden(t, "sweep-table.golden", out.Bytes())
}

// A sweep of points with repetitions shows each figure's interval where
// the repetitions gave one: commit latency, lag, the stale and predicted
// shares, the rates per 10,000 transactions.
func TestSweepTableWithIntervals(t *testing.T) {
	point := func(scale float64) *HeadlineFigs {
		var reps []*Summary
		for i := range 3 {
			f := float64(i) * scale
			reps = append(reps, rep(func(s *Summary) {
				s.TPM, s.Transactions = 600+60*f, 1000
				s.CommitLatency = stats.Percentiles{Count: 1000, P50: 2 + f, P99: 9 + f}
				s.Replicas["s1"] = &Replica{LagMs: stats.Percentiles{Count: 10, P50: 40 + f, P99: 44 + 2*f}}
				s.StaleReads = &StaleReads{Roles: map[string]string{"s1": "replica"}, Nodes: map[string]*check.NodeStale{
					"s1": {Reads: 500, Stale: int64(5 + f), StaleShare: (5 + f) / 500, Predicted: &check.Prediction{Share: (6 + f) / 500}}}}
				s.Consistency = &Consistency{TransactionsChecked: 1000, Anomalies: map[string]int64{"lost-update": int64(1 + f), "G2-item": 2}}
			}))
		}
		return Headline(Aggregate(reps, []string{"rep-01", "rep-02", "rep-03"}, 0.95))
	}
	sw := Sweep{Name: "readers", Complete: true, Parameters: []string{"links.wan.delay"}, Points: []SweepPoint{
		{Label: "p", Values: map[string]any{"links.wan.delay": "20ms"}, Dir: "p01", Summary: point(1)},
		{Label: "p", Values: map[string]any{"links.wan.delay": "75ms"}, Dir: "p02", Summary: point(0)},
	}}
	var out bytes.Buffer
	PrintSweep(&out, &sw)
	golden(t, "sweep-ci.golden", out.Bytes())
}

// A sweep of page reads has its own columns: pages per second, the page
// time and the share of slow pages.
func TestPageSweepTableGolden(t *testing.T) {
	pps := []float64{1.4, 11.43}
	share := []float64{0, 0.094}
	sw := Sweep{Name: "objectivity", Complete: true, Parameters: []string{"run.users"}}
	for i, u := range []int{1, 8} {
		sw.Points = append(sw.Points, SweepPoint{Label: "p", Values: map[string]any{"run.users": u}, Dir: "p0" + string(rune('1'+i)),
			Summary: &HeadlineFigs{Complete: true, CommitP50Ms: 690.17 + float64(i), CommitP99Ms: 1037.31, PagesPerS: &pps[i], SlowShare: &share[i]}})
	}
	sw.Points = append(sw.Points, SweepPoint{Label: "failed point", Values: map[string]any{}, Dir: "p03"})
	var out bytes.Buffer
	PrintSweep(&out, &sw)
	golden(t, "sweep-pages.golden", out.Bytes())
}

// A sweep of saturation searches shows each point's knee and exhaust
// point, and what ran out.
func TestSearchSweepTableGolden(t *testing.T) {
	knee, ex := []float64{30, 3}, []float64{300, 30}
	sw := Sweep{Name: "storage-oe", Complete: true, Parameters: []string{"node.db1.storage"}}
	for i, st := range []string{"das", "nas"} {
		h := &HeadlineFigs{Complete: true, TPM: 5898 - 1000*float64(i), CommitP50Ms: 2.1, CommitP99Ms: 30.8, Knee: &knee[i], Exhausted: &ex[i],
			RanOut: "cpu at site db: 0.97 cores of its limit of 1"}
		if i == 1 {
			h.Knee, h.RanOut = nil, ""
		}
		sw.Points = append(sw.Points, SweepPoint{Label: `node.db1.storage="` + st + `"`, Values: map[string]any{"node.db1.storage": st}, Dir: "p0" + string(rune('1'+i)), Summary: h})
	}
	var out bytes.Buffer
	PrintSweep(&out, &sw)
	golden(t, "sweep-search.golden", out.Bytes())
}

package report

import (
	"bytes"
	"testing"
)

func TestPrintSearch(t *testing.T) {
	eff := func(x float64) *float64 { return &x }
	steps := []SearchStep{
		{Load: 1, Dir: "step-01", Complete: true, TPS: 90.2, CommitP99Ms: 1.9, Scales: true,
			Resources: []Resource{{What: "the machine's cpu", Used: 0.21, Detail: "0.42 of 2 cores"}}},
		{Load: 4, Dir: "step-02", Complete: true, TPS: 352.8, CommitP99Ms: 2.4, Efficiency: eff(0.97), Scales: true,
			Resources: []Resource{{What: "cpu at site db", Used: 0.62, Detail: "0.06 cores of its limit of 0.1"}}},
		{Load: 16, Dir: "step-03", Complete: true, TPS: 461.5, CommitP99Ms: 48.1, ErrorPct: 0.02, Efficiency: eff(0.103), Why: "throughput stopped rising",
			Resources: []Resource{{What: "cpu at site db", Used: 0.97, Detail: "0.10 cores of its limit of 0.1"}}},
	}
	for _, tc := range []struct {
		name string
		s    Search
	}{
		{"search-knee", Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1, MaxP99Ms: 500, Steps: steps, KneeStep: 2, ExhaustStep: 3,
			Why: "throughput stopped rising", Resource: "cpu at site db: 0.10 cores of its limit of 0.1", Complete: true}},
		{"search-first", Search{By: "rate", MinEfficiency: 0.5, MaxErrorPct: 1, Steps: []SearchStep{{Load: 100, Dir: "step-01", Why: "the run did not complete: too many errors"}},
			ExhaustStep: 1, Why: "the run did not complete: too many errors", Complete: true}},
		{"search-not-exhausted", Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1, Steps: steps[:2], KneeStep: 2, Complete: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			PrintSearch(&b, &tc.s)
			golden(t, tc.name+".golden", b.Bytes())
		})
	}
}

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
		{"search-refined", Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1, MaxP99Ms: 500, Steps: steps, KneeStep: 2, ExhaustStep: 3,
			Why: "throughput stopped rising", Resource: "cpu at site db: 0.10 cores of its limit of 0.1", Complete: true,
			Refine: []SearchProbe{
				{SearchStep{Load: 10, Dir: "refine-01", Complete: true, TPS: 455.1, CommitP99Ms: 30.2, Efficiency: eff(0.193), Why: "throughput stopped rising: 455.1 tps after 352.8",
					Resources: []Resource{{What: "cpu at site db", Used: 0.96, Detail: "0.10 cores of its limit of 0.1"}}}, 4, ClosedExhaust},
				{SearchStep{Load: 7, Dir: "refine-02", Complete: true, TPS: 440.7, CommitP99Ms: 12.5, Efficiency: eff(0.332), Why: "throughput stopped rising: 440.7 tps after 352.8",
					Resources: []Resource{{What: "cpu at site db", Used: 0.93, Detail: "0.09 cores of its limit of 0.1"}}}, 4, ClosedExhaust},
				{SearchStep{Load: 5, Dir: "refine-03", Complete: true, TPS: 425.0, CommitP99Ms: 3.1, Efficiency: eff(0.818), Scales: true,
					Resources: []Resource{{What: "cpu at site db", Used: 0.85, Detail: "0.09 cores of its limit of 0.1"}}}, 4, ClosedKnee},
				{SearchStep{Load: 6, Dir: "refine-04", Complete: true, TPS: 436.2, CommitP99Ms: 6.0, Efficiency: eff(0.132), Why: "throughput stopped rising: 436.2 tps after 425.0, 13 % of the load's rise of 20 % (less than 50 %)",
					Resources: []Resource{{What: "cpu at site db", Used: 0.92, Detail: "0.09 cores of its limit of 0.1"}}}, 5, ClosedExhaust},
			},
			KneeLoad: 5, ExhaustLoad: 6, ExhaustResource: "cpu at site db: 0.09 cores of its limit of 0.1"}},
		{"search-not-exhausted", Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1, Steps: steps[:2], KneeStep: 2, Complete: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			PrintSearch(&b, &tc.s)
			golden(t, tc.name+".golden", b.Bytes())
		})
	}
}

// A sweep's row shows a refined search's final bracket, and what ran out
// there.
func TestHeadlineOfARefinedSearch(t *testing.T) {
	sr := &Search{By: "users", Steps: []SearchStep{{Load: 16, Scales: true}, {Load: 64}}, KneeStep: 1, ExhaustStep: 2, Resource: "disk",
		Refine:   []SearchProbe{{SearchStep{Load: 40, Scales: true}, 16, ClosedKnee}, {SearchStep{Load: 52}, 40, ClosedExhaust}},
		KneeLoad: 40, ExhaustLoad: 52, ExhaustResource: "cpu"}
	h := Headline(&Summary{Search: sr})
	if h.Knee == nil || *h.Knee != 40 || h.Exhausted == nil || *h.Exhausted != 52 || h.RanOut != "cpu" {
		t.Errorf("knee %v, exhausted %v, ran out %q; want 40, 52, cpu", h.Knee, h.Exhausted, h.RanOut)
	}
	sr.Refine, sr.ExhaustResource = nil, ""
	h = Headline(&Summary{Search: sr})
	if *h.Knee != 16 || *h.Exhausted != 64 || h.RanOut != "disk" {
		t.Errorf("unrefined: knee %v, exhausted %v, ran out %q", *h.Knee, *h.Exhausted, h.RanOut)
	}
}

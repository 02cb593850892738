package report

import (
	"bytes"
	"strings"
	"testing"

	"replab/internal/check"
)

// staleSummary is a run whose reads at standby s1 missed some writes.
func staleSummary(stale int64, share, predicted float64) *Summary {
	s := &Summary{Kind: "run", Complete: true}
	s.StaleReads = &StaleReads{Roles: map[string]string{"p1": "source", "s1": "replica"}, LagSampleEvery: 1,
		Nodes: map[string]*check.NodeStale{
			"p1": {Reads: 5000, AfterWrite: 4800},
			"s1": {Reads: 10000, AfterWrite: 9600, Stale: stale, StaleShare: share, RYWViolations: 12, RYWPer10k: 12, MonotonicPer10k: 3,
				StalenessMs: check.Dist{Count: stale, P50: 21.5, P90: 35, P99: 40.2, Max: 44.9},
				Predicted:   &check.Prediction{Share: predicted, ShareFromAck: 2 * predicted, Agree: true, SafeWindowMs: 42.5, SafeShare: 0.999, LagP999Ms: 45.1}},
		}}
	return s
}

func TestPrintStaleReadsGolden(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printStaleReads(&b, staleSummary(412, 0.0412, 0.0398))
	b.WriteString("---\n")
	agg := Aggregate([]*Summary{staleSummary(412, 0.0412, 0.0398), staleSummary(380, 0.038, 0.0401), staleSummary(440, 0.044, 0.0405)}, nil, 0.95)
	printStaleReads(&b, agg)
	golden(t, "stale-reads.txt", b.Bytes())
	if n := agg.StaleReads.Nodes["s1"]; n.Stale != 1232 || n.Reads != 30000 {
		t.Errorf("the aggregate sums counts: %d stale of %d reads, want 1232 of 30000", n.Stale, n.Reads)
	}
	if c, ok := agg.CI["stale_reads.nodes.s1.predicted.share"]; !ok || c.N != 3 {
		t.Errorf("no CI over 3 repetitions for the predicted share: %+v", agg.CI)
	}
	if !strings.Contains(b.String(), "agree") {
		t.Errorf("no agreement said:\n%s", b.String())
	}
}

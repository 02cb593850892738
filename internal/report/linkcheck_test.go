package report

import (
	"bytes"
	"strings"
	"testing"

	"replab/internal/monitor"
)

func TestPrintLinkChecks(t *testing.T) {
	pass := &monitor.LinkCheck{DelayOK: true, LossOK: true, RateOK: true}
	late := &monitor.LinkCheck{LossOK: true, RateOK: true, Flags: []string{"delay: configured 25 ms, delivered p99 27 ms"}}
	tests := []struct {
		name  string
		kind  string
		links map[string]monitor.LinkSummary
		want  []string // lines, in order
	}{
		{"all pass: nothing", "", map[string]monitor.LinkSummary{"a->b": {Check: pass}, "b->a": {Check: pass}}, nil},
		{"a summary from before the check: nothing", "", map[string]monitor.LinkSummary{"a->b": {}}, nil},
		{"one line per strayed direction", "", map[string]monitor.LinkSummary{"a->b": {Check: pass}, "b->a": {Check: late}},
			[]string{"  warning: link b->a strayed from its configuration: delay: configured 25 ms, delivered p99 27 ms"}},
		{"an aggregate names what strayed", "repetitions", map[string]monitor.LinkSummary{"a->b": {Check: &monitor.LinkCheck{DelayOK: true}}},
			[]string{"  warning: link a->b strayed from its configuration: loss, rate in some repetition (their reports say how)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printLinkChecks(&b, &Summary{Kind: tt.kind, Links: tt.links})
			got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if b.Len() == 0 {
				got = nil
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestLinkFactsTable(t *testing.T) {
	s := &Summary{Links: map[string]monitor.LinkSummary{
		"a->b": {DelayMs: 25, DelayP50Ms: 25.022, DelayP99Ms: 25.044, LatenessP99Us: 44, LossConfiguredPct: 1, LossDeliveredPct: 1.01,
			LossDrawnPackets: 1000, LossCI95LowPct: 0.55, LossCI95HighPct: 1.8, RateBps: 10e6, RatePeakSecondBps: 9.5e6,
			BytesByClass: monitor.ClassBytes{Replication: 1000, Client: 10}, Bytes: 1010,
			Check: &monitor.LinkCheck{DelayOK: true, LossOK: true, RateOK: true}},
		"b->a": {DelayMs: 25, Check: &monitor.LinkCheck{LossOK: true, RateOK: true, Flags: []string{"delay: late"}}},
		"old":  {DelayMs: 5},
	}}
	tb, ok := linkFactsTable(s)
	if !ok || len(tb.Rows) != 2 {
		t.Fatalf("rows %d; want 2 (the summary from before the check has none)", len(tb.Rows))
	}
	if got := tb.Rows[1][len(tb.Rows[1])-1]; got.Text != "strayed" || got.Title != "delay: late" {
		t.Errorf("b->a check cell %+v; want strayed with its flag on hover", got)
	}
	cls, ok := linkClassTable(s)
	if !ok || len(cls.Rows) != 2 || cls.Rows[0][1].Text == "" {
		t.Errorf("class table %+v", cls.Rows)
	}
}

package livemetrics

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestScrapeSeesWhatWasRecorded(t *testing.T) {
	m := New()
	addr, err := m.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Run("lab1", "postgres", "personnel")
	m.Phase("measure")
	for range 3 {
		m.Committed("update", int64(3*time.Millisecond))
	}
	m.Committed("lookup", int64(40*time.Second))
	m.Failed("update", "40001")
	m.Lag("e1", int64(52*time.Millisecond))
	m.Fault("apply", "link")
	m.Links(func() []Link {
		return []Link{{Direction: "a->b", DeliveredBytes: 1500, DroppedPackets: 2, QueueBytes: 300}}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := Scrape(ctx, "http://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"replab_transactions_total", []string{"type", "update"}, 3},
		{"replab_transactions_total", []string{"type", "lookup"}, 1},
		{"replab_errors_total", []string{"type", "update", "code", "40001"}, 1},
		{"replab_commit_latency_seconds", []string{"type", "update"}, 3},
		{"replab_lag_seconds", []string{"replica", "e1"}, 1},
		{"replab_lag_last_seconds", []string{"replica", "e1"}, 0.052},
		{"replab_faults_total", []string{"action", "apply", "kind", "link"}, 1},
		{"replab_phase", []string{"phase", "measure"}, 1},
		{"replab_phase", []string{"phase", "warmup"}, 0},
		{"replab_run_info", []string{"lab", "lab1", "engine", "postgres"}, 1},
		{"replab_link_delivered_bytes_total", []string{"direction", "a->b"}, 1500},
		{"replab_link_dropped_packets_total", []string{"direction", "a->b"}, 2},
		{"replab_link_queue_bytes", []string{"direction", "a->b"}, 300},
	} {
		mf := got[tc.family]
		if mf == nil {
			t.Errorf("no family %s in the scrape (have %d families)", tc.family, len(got))
			continue
		}
		if v := Sum(mf, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, v, tc.want)
		}
	}
	// The 40 s lookup lands in the 32–64 s bucket, not past the last.
	if h := got["replab_commit_latency_seconds"]; h != nil {
		for _, mm := range h.GetMetric() {
			if mm.GetLabel()[0].GetValue() == "lookup" && mm.GetHistogram().GetSampleSum() != 40 {
				t.Errorf("lookup latency sum %v s, want 40", mm.GetHistogram().GetSampleSum())
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Scrape(ctx, "http://"+addr+"/metrics"); err == nil {
		t.Error("still serving after Close")
	}
}

func TestNilMetricsDoNothing(t *testing.T) {
	var m *Metrics
	m.Run("a", "b", "c")
	m.Phase("measure")
	m.Committed("x", 1)
	m.Failed("x", "y")
	m.Lag("r", 1)
	m.Fault("apply", "node")
	m.Links(nil)
	if m.OnLag() != nil {
		t.Error("a nil Metrics gives the probe a hook")
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

func TestPortInUse(t *testing.T) {
	a := New()
	addr, err := a.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := New().Serve(addr); err == nil || !strings.Contains(err.Error(), "metrics: listen on "+addr) {
		t.Errorf("a second server on %s: %v, want a clear error", addr, err)
	}
}

// TestDashboardUsesOurNames keeps docs/grafana-dashboard.json in step with
// the names served, and docs/metrics.md documenting each.
func TestDashboardUsesOurNames(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json is not JSON: %v", err)
	}
	m := New() // a series of each, or a family without one is not gathered
	m.Run("l", "e", "w")
	m.Committed("t", 1)
	m.Failed("t", "c")
	m.Lag("r", 1)
	m.Fault("apply", "link")
	m.Links(func() []Link { return []Link{{Direction: "a->b"}} })
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, mf := range mfs {
		served[mf.GetName()] = true
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range served {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not document `%s`", name)
		}
	}
	used := regexp.MustCompile(`replab_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("the dashboard uses no replab metric")
	}
	for _, n := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
		if !served[n] && !served[base] {
			t.Errorf("the dashboard uses %s, which replab does not serve", n)
		}
	}
}

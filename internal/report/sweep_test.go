package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
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

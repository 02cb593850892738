package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"replab/internal/fault"
)

// testdata/faults is testdata/run with a fault schedule written by hand
// (see testdata/README.md): faults.csv holds 4 faults (a link down and
// healed, a kill never healed, a pause whose heal failed, and a delay
// from a second shell), summary.json the 3 scheduled ones.

// timeCharts are the run's charts whose x axis is run time.
var timeCharts = []string{"throughput", "latency-time", "lag-time", "repl-bytes", "link-util"}

var faultMarkRE = regexp.MustCompile(`<(rect|line) class="fault"`)

func renderFaults(t *testing.T, dir string) (string, *Results) {
	t.Helper()
	r, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String(), r
}

// marksPerChart counts the fault marks in each figure of a page.
func marksPerChart(page string) map[string]int {
	out := map[string]int{}
	for _, fig := range strings.Split(page, `<figure id="fig-`)[1:] {
		id, _, _ := strings.Cut(fig, `"`)
		out[id] = len(faultMarkRE.FindAllString(fig, -1))
	}
	return out
}

func TestPrintSummaryFaults(t *testing.T) {
	r := mustRead(t, filepath.Join("testdata", "faults"))
	var b bytes.Buffer
	PrintSummary(&b, r.Summary)
	golden(t, "summary-faults.golden", b.Bytes())
}

func TestHTMLFaults(t *testing.T) {
	page, r := renderFaults(t, fixture(t, "faults"))
	if len(r.Problems) > 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	checkPage(t, page, reportCase{charts: []string{"throughput", "latency-time", "latency-cdf", "lag-time", "lag-cdf", "repl-bytes", "link-util", "roles"}})
	marks := marksPerChart(page)
	total := 0
	for _, id := range timeCharts {
		if marks[id] != 4 {
			t.Errorf("chart %s has %d fault marks, want 4 (faults.csv's)", id, marks[id])
		}
		total += marks[id]
	}
	if n := len(faultMarkRE.FindAllString(page, -1)); n != total || n != 4*len(timeCharts) {
		t.Errorf("%d fault marks in the page, want %d on the time charts only", n, 4*len(timeCharts))
	}
	// 3 bands (the pause's to the end: its heal failed; one from a second
	// shell) and 1 line per chart.
	if n := strings.Count(page, `<line class="fault"`); n != len(timeCharts) {
		t.Errorf("%d fault lines, want %d (the kill, never healed, on each time chart)", n, len(timeCharts))
	}
	for _, want := range []string{`<section id="faults">`, "not within the run", "primary&lt;-&gt;asia down", "e1 kill",
		"primary&lt;-&gt;eu delay 250ms (shell)", "Fault 2 (node a1 pause) failed: heal: SIGCONT a1: no such process",
		"a1 4012.5", "recovered after s", "a1 pause (heal failed)", "faults.csv: every fault applied and healed"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestHTMLFaultsFromSummaryAlone(t *testing.T) {
	for _, tc := range []struct {
		name, csv, note string
	}{
		{"no faults.csv", "", ""},
		{"a malformed faults.csv", "at_s,fault,action\n1.0,0,apply\n", "faults.csv could not be read (not a faults.csv"},
		{"a short line", "at_s,fault,action,what,error\n1.0,0\n", "faults.csv could not be read ("},
		{"a bad number", "at_s,fault,action,what,error\nsoon,0,apply,node e1 kill,\n", "faults.csv line 2: bad number"},
		{"an unknown action", "at_s,fault,action,what,error\n1.0,0,break,node e1 kill,\n", `action &#34;break&#34; is neither`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t, "faults")
			path := filepath.Join(dir, FaultsFile)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if tc.csv != "" {
				if err := os.WriteFile(path, []byte(tc.csv), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			page, r := renderFaults(t, dir)
			if (r.FaultsError != "") != (tc.csv != "") {
				t.Errorf("FaultsError %q", r.FaultsError)
			}
			if !strings.Contains(page, tc.note) {
				t.Errorf("page lacks %q", tc.note)
			}
			if !strings.Contains(page, `<section id="faults">`) || !strings.Contains(page, "SIGCONT a1") {
				t.Error("no Faults section with summary.json's table")
			}
			// The 3 scheduled faults of summary.json, the rest of the page as usual.
			for _, id := range timeCharts {
				if n := marksPerChart(page)[id]; n != 3 {
					t.Errorf("chart %s has %d fault marks, want 3 (summary.json's)", id, n)
				}
			}
			for _, want := range []string{"Throughput over time", "Replication lag over time", "Environment"} {
				if !strings.Contains(page, want) {
					t.Errorf("page lacks %q", want)
				}
			}
		})
	}
}

// A run without faults renders no marks and no Faults section.
func TestHTMLNoFaults(t *testing.T) {
	page, _ := renderFaults(t, fixture(t, "run"))
	if strings.Contains(page, `class="fault"`) || strings.Contains(page, `id="faults"`) {
		t.Error("a run without faults shows faults")
	}
}

func TestCompareWithFaults(t *testing.T) {
	var rs []*Results
	for _, d := range []string{"run", "faults"} {
		r := mustRead(t, filepath.Join("testdata", d))
		rs = append(rs, r)
	}
	c, err := Compare(rs, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	PrintCompare(&b, c)
	if !strings.Contains(b.String(), "quickstart-faults") {
		t.Errorf("comparison lacks the faulted run:\n%s", b.String())
	}
}

// repsWithFaults is reps-async's repetitions, each given the same two
// faults with different figures: fault 0 (a link down 2–6 s) recovered
// in repetitions 1 and 2, fault 1 (a kill at 9 s, not healed) only in
// repetition 2, where killing failed.
func repsWithFaults(t *testing.T) ([]*Summary, []string) {
	sums, dirs := repSums(t, "reps-async")
	f := func(v float64) *float64 { return &v }
	recover0 := []*float64{f(1), f(2), nil}
	recover1 := []*float64{nil, f(3), nil}
	for i, s := range sums {
		d := float64(i)
		s.Faults = []fault.Summary{
			{Fault: 0, What: "link primary<->asia set down", AtS: 2, HealS: f(6),
				Before:   fault.Window{FromS: 0, ToS: 2, TPS: 900 + 10*d, P99Ms: 15 + d, MaxMs: 30},
				During:   fault.Window{FromS: 2, ToS: 6, TPS: 300 + 30*d, P99Ms: 40 + 2*d, MaxMs: 90, Errors: int64(i)},
				After:    fault.Window{FromS: 6, ToS: 8, TPS: 880, P99Ms: 18, MaxMs: 35},
				RecoverS: recover0[i], LagPeakMs: map[string]float64{"a1": 3000 + 100*d, "e1": 80}, LagBeforeMs: map[string]float64{"a1": 200, "e1": 70}},
			{Fault: 1, What: "node e1 kill", AtS: 9,
				Before:   fault.Window{FromS: 8, ToS: 9, TPS: 910, P99Ms: 16},
				During:   fault.Window{FromS: 9, ToS: 10, TPS: 850 - 10*d, P99Ms: 20},
				After:    fault.Window{FromS: 10, ToS: 11, TPS: 905, P99Ms: 17},
				RecoverS: recover1[i], LagPeakMs: map[string]float64{"a1": 250 + d}},
		}
		if i == 1 {
			s.Faults[1].Err = "kill e1: no such process"
		}
	}
	return sums, dirs
}

// faultsByIndex is a summary's faults as a map by fault index, for
// figuresOfOneRepetition.
func faultsByIndex(t *testing.T, s *Summary) map[string]any {
	t.Helper()
	var m struct {
		Faults []map[string]any `json:"faults"`
	}
	if err := json.Unmarshal(encode(t, s), &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, f := range m.Faults {
		out[fmt.Sprint(f["fault"])] = f
	}
	return map[string]any{"faults": out}
}

func TestAggregateFaults(t *testing.T) {
	sums, dirs := repsWithFaults(t)
	var reps []map[string]any
	for _, s := range sums {
		reps = append(reps, faultsByIndex(t, s))
	}
	agg := Aggregate(sums, dirs, 0.95)
	if len(agg.Faults) != 2 {
		t.Fatalf("%d faults, want 2", len(agg.Faults))
	}
	bad, checked := figuresOfOneRepetition(faultsByIndex(t, agg), agg.CI, reps)
	for _, b := range bad {
		t.Error(b)
	}
	if checked < 30 {
		t.Errorf("checked only %d figures", checked)
	}
	f0, f1 := agg.Faults[0], agg.Faults[1]
	if f0.RecoverS == nil || *f0.RecoverS != 1.5 || agg.CI["faults.0.recover_s"].N != 2 {
		t.Errorf("fault 0 recover_s %v, CI %+v; want 1.5 over 2 repetitions", f0.RecoverS, agg.CI["faults.0.recover_s"])
	}
	if f1.RecoverS == nil || *f1.RecoverS != 3 || f1.HealS != nil {
		t.Errorf("fault 1: recover_s %v, heal_s %v; want 3 and none", f1.RecoverS, f1.HealS)
	}
	if f0.During.TPS != 330 || f0.LagPeakMs["a1"] != 3100 || f0.What != "link primary<->asia set down" {
		t.Errorf("fault 0: during tps %v, a1 lag peak %v, what %q", f0.During.TPS, f0.LagPeakMs["a1"], f0.What)
	}
	if want := "kill e1: no such process (1 of 3 repetitions)"; f1.Err != want || f0.Err != "" {
		t.Errorf("errors %q, %q; want none and %q", f0.Err, f1.Err, want)
	}
	var b bytes.Buffer
	PrintSummary(&b, agg)
	golden(t, "aggregate-faults.golden", b.Bytes())
	for _, want := range []string{"1.5 (2 of 3)", "3.0 (1 of 3)", "a1 3100.0", "fault 1 (node e1 kill) failed: kill e1: no such process (1 of 3 repetitions)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}

	// The repetitions' page shows them; compare takes the aggregate.
	dir := fixture(t, "reps-async")
	if err := (&Dir{Path: dir}).WriteJSON("summary.json", agg); err != nil {
		t.Fatal(err)
	}
	page, _ := renderFaults(t, dir)
	for _, want := range []string{`<section id="faults">`, "1.5 (2 of 3)", "Means over the repetitions, per fault"} {
		if !strings.Contains(page, want) {
			t.Errorf("repetitions page lacks %q", want)
		}
	}
	if strings.Contains(page, `class="fault"`) {
		t.Error("the repetitions page marks faults on a chart spanning every repetition")
	}
	r := mustRead(t, dir)
	if _, err := Compare([]*Results{r, mustRead(t, filepath.Join("testdata", "faults"))}, 0.95); err != nil {
		t.Fatal(err)
	}
}

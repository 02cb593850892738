package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	// 3 bands (one healed from a second shell) and 1 line per chart.
	if n := strings.Count(page, `<line class="fault"`); n != len(timeCharts) {
		t.Errorf("%d fault lines, want %d (the kill, never healed, on each time chart)", n, len(timeCharts))
	}
	for _, want := range []string{`<section id="faults">`, "not within the run", "primary&lt;-&gt;asia down", "e1 kill",
		"primary&lt;-&gt;eu delay 250ms (shell)", "Fault 2 (node a1 pause) failed: heal: SIGCONT a1: no such process",
		"a1 4012.5", "recovered after s", "faults.csv: every fault applied and healed"} {
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

package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/check"
	"replab/internal/history"
)

// The consistency fixture: testdata/run with a history written here and
// checked as the runner checks one (check.json, anomalies.csv,
// summary.json consistency). The history, on list-append keys, has write
// skew 3 s into the run (G2-item), a lost update at 8 s (lost-update and
// G-single), a failed append and an unknown one nobody saw.

// fixtureStartNs is the driver's start on the history's clock.
const fixtureStartNs = 5_000_000_000_000

func at(s float64) int64 { return fixtureStartNs + int64(s*1e9) }

func consistencyHistory() []history.Op {
	ok, fail, info := history.OK, history.Fail, history.Info
	op := func(p int, typ history.Type, from, to float64, mops ...history.Mop) history.Op {
		o := history.Op{Process: p, Node: "p1", Type: typ, F: history.FTxn, InvokeNs: at(from), CompleteNs: at(to), TxnType: "txn", Value: mops}
		if typ != ok {
			o.Error = "40001"
		}
		return o
	}
	rl, app := history.ReadList, history.Append
	return []history.Op{
		op(0, ok, 1.0, 1.1, app(9, 90)),
		op(0, ok, 2.90, 2.95, rl(1, nil), rl(2, nil), app(1, 10)),
		op(1, ok, 2.91, 2.96, rl(1, nil), rl(2, nil), app(2, 20)),
		op(2, fail, 4.0, 4.1, app(1, 11)),
		op(2, ok, 5.0, 5.1, rl(1, []int64{10}), rl(2, []int64{20})),
		op(0, ok, 7.90, 8.00, rl(3, nil), app(3, 30)),
		op(1, ok, 7.91, 8.05, rl(3, nil), app(3, 31)),
		op(3, info, 8.5, 9.5, app(4, 40)),
		op(2, ok, 9.0, 9.1, rl(3, []int64{30, 31}), rl(9, []int64{90})),
	}
}

// consistencyFixture writes the fixture and returns its directory.
func consistencyFixture(t *testing.T) string {
	t.Helper()
	dir := fixture(t, "run")
	d := &Dir{Path: dir}
	w, err := history.Create(d.File(history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	ops := consistencyHistory()
	for _, op := range ops {
		if _, err := w.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := check.File(d.File(history.FileName), check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSONFile(d.File(CheckFile)); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAnomalies(AnomaliesPerSecond(res, fixtureStartNs)); err != nil {
		t.Fatal(err)
	}
	var sum Summary
	readJSON(t, d.File("summary.json"), &sum)
	sum.Name, sum.Workload = "quickstart-anomalies", "list-append"
	sum.Consistency = NewConsistency(res)
	sum.Consistency.Operations, sum.Consistency.MeasureOperations, sum.Consistency.CheckSeconds = int64(len(ops)), int64(len(ops)-1), 0.01
	if err := d.WriteJSON("summary.json", &sum); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConsistencyInTheSummaryGolden(t *testing.T) {
	r := mustRead(t, consistencyFixture(t))
	var b bytes.Buffer
	printConsistency(&b, r.Summary)
	golden(t, "summary-consistency.golden", b.Bytes())
}

func TestAnomaliesPerSecondGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(consistencyFixture(t), AnomaliesFile))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "anomalies-consistency.csv.golden", b)
}

// TestAnomaliesSectionGolden: the HTML report's section, as text: its
// notes, tables, witnesses and the chart's lines.
func TestAnomaliesSectionGolden(t *testing.T) {
	r := mustRead(t, consistencyFixture(t))
	var missing []string
	sec, ok := consistencySection(r, &missing)
	if !ok || len(missing) > 0 {
		t.Fatalf("section %v, missing %v", ok, missing)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n%s\n", sec.Title, sec.Intro)
	for _, n := range sec.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, tb := range sec.Tables {
		fmt.Fprintf(&b, "\ntable %s\n", tb.Caption)
		for _, row := range append([][]tcell{tb.Head}, tb.Rows...) {
			var cells []string
			for _, c := range row {
				cells = append(cells, c.Text)
			}
			if len(cells) > 0 {
				fmt.Fprintf(&b, "  %s\n", strings.Join(cells, " | "))
			}
		}
	}
	for _, p := range sec.Pre {
		fmt.Fprintf(&b, "\n%s\n", p)
	}
	for _, f := range sec.Figures {
		fmt.Fprintf(&b, "\nfigure %s: %s\n  %s\n", f.ID, f.Title, f.Note)
		for _, l := range f.Legend {
			fmt.Fprintf(&b, "  line %s\n", l.Name)
		}
	}
	golden(t, "html-anomalies-section.golden", []byte(b.String()))
	c := anomaliesChart("anomalies-time", r)
	if c.missing != "" || !strings.Contains(c.fig.SVG, "<svg") {
		t.Errorf("anomalies chart: %q", c.missing)
	}
}

// TestAggregateSumsConsistency: an aggregate of repetitions sums the
// counts of every repetition checked (an incomplete one too), keeps the
// models every one satisfied and those any violated, and the first
// witnesses with their repetition; a repetition whose history could not
// be checked says so.
func TestAggregateSumsConsistency(t *testing.T) {
	r := mustRead(t, consistencyFixture(t))
	clean := &Consistency{Operations: 100, MeasureOperations: 80, TransactionsChecked: 90, Anomalies: map[string]int64{},
		ModelsSatisfied: append(append([]string{}, check.Models...), check.SessionModels...), ModelsViolated: []string{},
		StrongestSatisfied: check.StrictSerializable, WeakestViolated: "none", SessionGuaranteesViolated: []string{}, Complete: true, Skipped: []string{}, CheckSeconds: 0.02}
	a, b, c := *r.Summary, *r.Summary, *r.Summary
	b.Consistency, b.Complete, b.StopReason = clean, false, "interrupted"
	c.Consistency = &Consistency{Operations: 7, Error: "check history.jsonl: op 3 (line 4): value 10 appended to key 1 twice"}
	agg := Aggregate([]*Summary{&a, &b, &c}, []string{"rep-01", "rep-02", "rep-03"}, 0.95)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(agg.Consistency); err != nil {
		t.Fatal(err)
	}
	golden(t, "aggregate-consistency.json.golden", out.Bytes())
	var reps []string
	for _, rep := range agg.Repetitions {
		n := "-"
		if rep.Anomalies != nil {
			n = fmt.Sprint(*rep.Anomalies)
		}
		reps = append(reps, rep.Dir+" "+n)
	}
	if got := strings.Join(reps, ", "); got != "rep-01 3, rep-02 0, rep-03 -" {
		t.Errorf("repetitions' anomalies: %s", got)
	}
}

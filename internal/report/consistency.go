package report

// Consistency (issue 31) in the results: summary.json's consistency, the
// terminal's block, the aggregate of repetitions, check.json and
// anomalies.csv read back, and the HTML report's anomalies section.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"replab/internal/check"
)

// Files a run that records its history writes.
const (
	CheckFile     = "check.json"
	AnomaliesFile = "anomalies.csv"
)

// SummaryWitnesses is how many witnesses summary.json keeps (check.json
// keeps more).
const SummaryWitnesses = 2

// Consistency is what the check of a run's history found: summary.json
// consistency. check.json has all of it, every witness kept included; an
// aggregate of repetitions sums the counts over every repetition that was
// checked (complete or not: an anomaly is evidence either way).
type Consistency struct {
	// Operations recorded in history.jsonl (every attempt, every phase),
	// and of them those invoked in the measure phase.
	Operations        int64 `json:"operations"`
	MeasureOperations int64 `json:"measure_operations"`
	// TransactionsChecked: committed transactions in the dependency graph.
	TransactionsChecked int64 `json:"transactions_checked"`
	// Anomalies by class, with their counts.
	Anomalies map[string]int64 `json:"anomalies"`
	// The models of check.Models and check.SessionModels, strongest
	// first; the strongest satisfied and the weakest violated of the
	// lattice ("none" when there is none).
	ModelsSatisfied    []string `json:"models_satisfied"`
	ModelsViolated     []string `json:"models_violated"`
	StrongestSatisfied string   `json:"strongest_satisfied"`
	WeakestViolated    string   `json:"weakest_violated"`
	// SessionGuaranteesViolated: read-your-writes, monotonic reads, …
	SessionGuaranteesViolated []string `json:"session_guarantees_violated"`
	// InfoUndecided: operations of unknown outcome none of whose writes
	// a read observed (left out of the graph).
	InfoUndecided int64 `json:"info_undecided"`
	// Complete is false when the checker skipped something (Skipped says
	// what): satisfied then means satisfied by the part checked.
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped"`
	// HistoryCutShort is set when history.jsonl's last line was cut short
	// (the rest was checked).
	HistoryCutShort *check.CutShort `json:"history_cut_short"`
	// Witnesses are the first SummaryWitnesses anomalies as text; Dir
	// names the repetition in an aggregate.
	Witnesses []ConsistencyWitness `json:"witnesses,omitempty"`
	// CheckSeconds is how long the check took (summed in an aggregate).
	CheckSeconds float64 `json:"check_s"`
	// Error says why the history could not be checked (refused: a value
	// written twice; unreadable), "" when it was.
	Error string `json:"error,omitempty"`
}

// ConsistencyWitness is one anomaly as the terminal prints it.
type ConsistencyWitness struct {
	Class   string   `json:"class"`
	Summary string   `json:"summary"`
	Lines   []string `json:"lines"`
	Dir     string   `json:"dir,omitempty"`
}

// NewConsistency is summary.json's consistency from the checker's result.
func NewConsistency(r *check.Result) *Consistency {
	c := &Consistency{TransactionsChecked: int64(r.TransactionsChecked), Anomalies: map[string]int64{},
		ModelsSatisfied: r.ModelsSatisfied, ModelsViolated: r.ModelsViolated,
		StrongestSatisfied: r.StrongestSatisfied, WeakestViolated: r.WeakestViolated,
		SessionGuaranteesViolated: r.SessionGuaranteesViolated, InfoUndecided: int64(r.InfoUndecided),
		Complete: r.Complete, Skipped: r.Skipped, HistoryCutShort: r.HistoryCutShort}
	for _, class := range r.Classes() {
		c.Anomalies[class] = int64(r.Anomalies[class])
	}
	for _, class := range r.Classes() {
		for _, w := range r.Witnesses[class] {
			if len(c.Witnesses) == SummaryWitnesses {
				return c
			}
			c.Witnesses = append(c.Witnesses, ConsistencyWitness{Class: class, Summary: w.Summary, Lines: w.Lines(r.TimeOriginNs)})
		}
	}
	return c
}

// anomalyCount is how many anomalies c found, every class together.
func (c *Consistency) anomalyCount() int64 {
	var n int64
	for _, v := range c.Anomalies {
		n += v
	}
	return n
}

// classes are c's anomaly classes, most severe first (as the checker
// lists them).
func (c *Consistency) classes() []string {
	r := &check.Result{Anomalies: map[string]int{}}
	for k, v := range c.Anomalies {
		r.Anomalies[k] = int(v)
	}
	return r.Classes()
}

// printConsistency is the terminal's block: the verdict, the anomalies
// by class and up to two witnesses.
func printConsistency(w io.Writer, s *Summary) {
	c := s.Consistency
	if c == nil {
		return
	}
	agg := s.Kind == "repetitions"
	if c.Error != "" {
		fmt.Fprintf(w, "  consistency not checked: %s\n", c.Error)
		return
	}
	partly := ""
	if !c.Complete {
		partly = " (in the part checked)"
	}
	fmt.Fprintf(w, "  consistency strongest model satisfied%s: %s; weakest violated: %s\n", partly, c.StrongestSatisfied, c.WeakestViolated)
	sums := ""
	if agg {
		sums = ", sums over the repetitions"
	}
	fmt.Fprintf(w, "              %s transactions checked of %s operations recorded (%s in the measure phase)%s\n",
		group(float64(c.TransactionsChecked)), group(float64(c.Operations)), group(float64(c.MeasureOperations)), sums)
	if c.InfoUndecided > 0 {
		fmt.Fprintf(w, "              unknown outcome: %d operations left undecided (no read saw their writes)\n", c.InfoUndecided)
	}
	if len(c.SessionGuaranteesViolated) > 0 {
		fmt.Fprintf(w, "              session guarantees violated: %s\n", strings.Join(c.SessionGuaranteesViolated, ", "))
	}
	if c.HistoryCutShort != nil {
		fmt.Fprintf(w, "              the %s; what came before was checked\n", c.HistoryCutShort.Message)
	}
	for _, sk := range c.Skipped {
		fmt.Fprintf(w, "              not checked: %s\n", sk)
	}
	if c.anomalyCount() == 0 {
		fmt.Fprintf(w, "              anomalies: none found\n")
		return
	}
	var parts []string
	for _, class := range c.classes() {
		parts = append(parts, fmt.Sprintf("%s ×%d", class, c.Anomalies[class]))
	}
	fmt.Fprintf(w, "              anomalies: %s\n", strings.Join(parts, ", "))
	for i, wt := range c.Witnesses {
		in := ""
		if wt.Dir != "" {
			in = " in " + wt.Dir
		}
		fmt.Fprintf(w, "              %d. %s%s: %s\n", i+1, wt.Class, in, wt.Summary)
		for _, l := range wt.Lines {
			fmt.Fprintf(w, "                 %s\n", l)
		}
	}
	fmt.Fprintf(w, "              (times: seconds after the history's first operation; every witness: check.json, or replab check DIR)\n")
}

// foldConsistency is the aggregate's consistency: counts summed over
// every repetition that was checked, the models satisfied by all of them
// and violated by any, the first witnesses with their repetition.
func foldConsistency(sums []*Summary, dirs []string) *Consistency {
	var agg *Consistency
	satisfied := map[string]int{}
	violated := map[string]bool{}
	sessions := map[string]bool{}
	checked := 0
	for i, s := range sums {
		if s == nil || s.Consistency == nil {
			continue
		}
		c := s.Consistency
		dir := fmt.Sprintf("rep-%02d", i+1)
		if i < len(dirs) {
			dir = dirs[i]
		}
		if agg == nil {
			agg = &Consistency{Anomalies: map[string]int64{}, Complete: true, Skipped: []string{}}
		}
		agg.Operations += c.Operations
		agg.MeasureOperations += c.MeasureOperations
		agg.CheckSeconds += c.CheckSeconds
		if c.Error != "" {
			agg.Error = strings.TrimPrefix(agg.Error+"; "+dir+": "+c.Error, "; ")
			agg.Complete = false
			continue
		}
		checked++
		agg.TransactionsChecked += c.TransactionsChecked
		agg.InfoUndecided += c.InfoUndecided
		for k, v := range c.Anomalies {
			agg.Anomalies[k] += v
		}
		for _, m := range c.ModelsSatisfied {
			satisfied[m]++
		}
		for _, m := range c.ModelsViolated {
			violated[m] = true
		}
		for _, g := range c.SessionGuaranteesViolated {
			sessions[g] = true
		}
		agg.Complete = agg.Complete && c.Complete
		for _, sk := range c.Skipped {
			agg.Skipped = append(agg.Skipped, dir+": "+sk)
		}
		if c.HistoryCutShort != nil && agg.HistoryCutShort == nil {
			cut := *c.HistoryCutShort
			cut.Message = dir + ": " + cut.Message
			agg.HistoryCutShort = &cut
		}
		for _, wt := range c.Witnesses {
			if len(agg.Witnesses) < SummaryWitnesses {
				wt.Dir = dir
				agg.Witnesses = append(agg.Witnesses, wt)
			}
		}
	}
	if agg == nil {
		return nil
	}
	all := append(slices.Clone(check.Models), check.SessionModels...)
	agg.ModelsSatisfied, agg.ModelsViolated = []string{}, []string{}
	for _, m := range all {
		switch {
		case violated[m]:
			agg.ModelsViolated = append(agg.ModelsViolated, m)
		case checked > 0 && satisfied[m] == checked:
			agg.ModelsSatisfied = append(agg.ModelsSatisfied, m)
		}
	}
	agg.StrongestSatisfied, agg.WeakestViolated = "none", "none"
	for _, m := range check.Models {
		if checked > 0 && satisfied[m] == checked && !violated[m] && agg.StrongestSatisfied == "none" {
			agg.StrongestSatisfied = m
		}
		if violated[m] {
			agg.WeakestViolated = m
		}
	}
	agg.SessionGuaranteesViolated = []string{}
	for _, g := range check.SessionGuarantees {
		if sessions[g] {
			agg.SessionGuaranteesViolated = append(agg.SessionGuaranteesViolated, g)
		}
	}
	return agg
}

// readCheck reads check.json into r.Check, when there is one.
func (r *Results) readCheck() {
	r.Check, _ = readOptional(r, CheckFile, func(rd io.Reader) (*check.Result, error) {
		var c check.Result
		if err := json.NewDecoder(rd).Decode(&c); err != nil {
			return nil, err
		}
		return &c, nil
	})
}

// AnomalyRow is one line of anomalies.csv: how many anomalies of a class
// could first be seen in second T of the run (T as in series.csv: the
// second that ends T seconds after the driver started).
type AnomalyRow struct {
	T     float64
	Class string
	Count float64
}

func parseAnomaly(t *table, row []string) AnomalyRow {
	return AnomalyRow{T: t.num(row, "t_s"), Class: t.str(row, "class"), Count: t.num(row, "anomalies")}
}

// WriteAnomalies writes anomalies.csv: per second and class, the anomalies
// whose last transaction completed in that second.
func (d *Dir) WriteAnomalies(rows []AnomalyRow) error {
	var b strings.Builder
	b.WriteString("t_s,class,anomalies\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,%s,%d\n", int64(r.T), r.Class, int64(r.Count))
	}
	return os.WriteFile(d.File(AnomaliesFile), []byte(b.String()), 0o644)
}

// AnomaliesPerSecond places every witness of res on the run's seconds:
// the second in which its last transaction completed, counted from
// startNs (the driver's start, on the history's clock). Rows are by
// second, then class.
func AnomaliesPerSecond(res *check.Result, startNs int64) []AnomalyRow {
	type key struct {
		sec   int64
		class string
	}
	count := map[key]int64{}
	for _, class := range res.Classes() {
		for _, w := range res.Witnesses[class] {
			sec := int64(1)
			if t := w.CompleteNs(); t > startNs {
				sec = (t-startNs-1)/1e9 + 1
			}
			count[key{sec, class}]++
		}
	}
	keys := slices.SortedFunc(maps.Keys(count), func(a, b key) int {
		if a.sec != b.sec {
			return cmp.Compare(a.sec, b.sec)
		}
		return strings.Compare(a.class, b.class)
	})
	rows := make([]AnomalyRow, len(keys))
	for i, k := range keys {
		rows[i] = AnomalyRow{T: float64(k.sec), Class: k.class, Count: float64(count[k])}
	}
	return rows
}

// anomalyClasses are the classes of rows, by how many anomalies each has,
// most first.
func anomalyClasses(rows []AnomalyRow) []string {
	n := map[string]float64{}
	for _, r := range rows {
		n[r.Class] += r.Count
	}
	cs := slices.Sorted(maps.Keys(n))
	slices.SortStableFunc(cs, func(a, b string) int {
		switch {
		case n[a] > n[b]:
			return -1
		case n[a] < n[b]:
			return 1
		}
		return 0
	})
	return cs
}

// anomaliesChart: anomalies per second over the run, one line per class
// (the four with most anomalies, the rest together), phases shaded and
// faults marked as on the throughput chart. A second without a row in
// anomalies.csv had none.
func anomaliesChart(id string, r *Results) chart {
	c := r.Summary.Consistency
	if c == nil || c.Error != "" {
		return chart{missing: "anomalies over time: the history was not checked"}
	}
	if r.Anomalies == nil {
		if _, err := os.Stat(r.file(AnomaliesFile)); err != nil {
			return chart{missing: "anomalies over time: no " + AnomaliesFile}
		}
	}
	lc := &lineChart{ID: id, Title: "Anomalies over time", X: freeAxis("time since the run started (s)"),
		Y: freeAxis("anomalies per second (at their last transaction's completion)"), XBands: phaseBands(r.Series)}
	lc.X.Min, lc.Y.Min = 0, 0
	last := 0.0
	for _, s := range r.Series {
		last = max(last, s.T)
	}
	for _, a := range r.Anomalies {
		last = max(last, a.T)
	}
	classes := anomalyClasses(r.Anomalies)
	const shown = 4
	name := func(class string) string {
		if i := slices.Index(classes, class); i >= shown {
			return "other classes"
		}
		return class
	}
	perSec := map[string]map[float64]float64{}
	var names []string
	for _, a := range r.Anomalies {
		n := name(a.Class)
		if perSec[n] == nil {
			perSec[n] = map[float64]float64{}
			names = append(names, n)
		}
		perSec[n][a.T] += a.Count
	}
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(slices.Index(classes, a)+boolInt(a == "other classes")*len(classes), slices.Index(classes, b)+boolInt(b == "other classes")*len(classes))
	})
	if len(names) == 0 {
		names = []string{"anomalies"}
		perSec["anomalies"] = map[float64]float64{}
	}
	for i, n := range names {
		l := line{Name: n, Colour: colour(i)}
		for t := 1.0; t <= last; t++ {
			l.Pts = append(l.Pts, point{t - 0.5, perSec[n][t]})
		}
		lc.Lines = append(lc.Lines, l)
	}
	var placed float64
	for _, a := range r.Anomalies {
		placed += a.Count
	}
	lc.Note = fmt.Sprintf("%s of the %s anomalies found, each in the second its last transaction completed.", group(placed), group(float64(c.anomalyCount())))
	if c.anomalyCount() == 0 {
		lc.Note = "No anomaly was found."
	}
	addFaultMarks(lc, r, false)
	return chart{fig: lc.figure()}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// consistencySection is the report's anomalies section: the verdict, the
// anomalies by class with the models each rules out, a few witnesses as
// text (check.json's, else summary.json's), and anomalies per second.
func consistencySection(r *Results, missing *[]string) (section, bool) {
	s := r.Summary
	if s == nil || s.Consistency == nil {
		return section{}, false
	}
	c := s.Consistency
	sec := section{ID: "anomalies", Title: "Anomalies",
		Intro: "Every operation the users issued was recorded (history.jsonl) and checked for the patterns each consistency model forbids, each with a witness: the transactions involved and why each depends on the other (docs/consistency.md)."}
	agg := s.Kind == "repetitions"
	if agg {
		sec.Intro += " Counts are sums over the repetitions that were checked; a model is satisfied when every repetition satisfied it; each repetition's report has its anomalies over time."
	}
	if c.Error != "" {
		sec.Notes = append(sec.Notes, "The history was not checked: "+c.Error+".")
		return sec, true
	}
	partly := ""
	if !c.Complete {
		partly = " (in the part checked)"
	}
	v := htmlTable{Caption: "Verdict"}
	row := func(k, val string) { v.Rows = append(v.Rows, []tcell{txt(k), {Text: val, Class: "wrap"}}) }
	row("strongest model satisfied"+partly, c.StrongestSatisfied)
	row("weakest model violated", c.WeakestViolated)
	row("models satisfied"+partly, orNone(c.ModelsSatisfied))
	row("models violated", orNone(c.ModelsViolated))
	row("session guarantees violated", orNone(c.SessionGuaranteesViolated))
	row("transactions checked", group(float64(c.TransactionsChecked)))
	row("operations recorded", fmt.Sprintf("%s (%s in the measure phase)", group(float64(c.Operations)), group(float64(c.MeasureOperations))))
	row("unknown outcomes undecided", group(float64(c.InfoUndecided)))
	row("checked in", fmt.Sprintf("%.2f s", c.CheckSeconds))
	sec.Tables = append(sec.Tables, v)
	if c.HistoryCutShort != nil {
		sec.Notes = append(sec.Notes, "The "+c.HistoryCutShort.Message+"; what came before was checked.")
	}
	for _, sk := range c.Skipped {
		sec.Notes = append(sec.Notes, "Not checked: "+sk)
	}
	if c.anomalyCount() > 0 {
		t := htmlTable{Caption: "Anomalies by class", Head: []tcell{txt("class"), numHead("count"), txt("rules out")}}
		for _, class := range c.classes() {
			t.Rows = append(t.Rows, []tcell{txt(class), num(group(float64(c.Anomalies[class]))), {Text: strings.Join(check.Violates[class], ", "), Class: "wrap"}})
		}
		sec.Tables = append(sec.Tables, t)
		sec.Pre = witnessTexts(r)
	} else {
		sec.Notes = append(sec.Notes, "No anomaly was found"+partly+".")
	}
	if !agg {
		addFigure(&sec, missing, anomaliesChart("anomalies-time", r))
	}
	return sec, true
}

// witnessTexts are up to three witnesses of each class as the terminal
// prints them: check.json's when it is there, else summary.json's.
func witnessTexts(r *Results) []string {
	var out []string
	if res := r.Check; res != nil {
		for _, class := range res.Classes() {
			for i, w := range res.Witnesses[class] {
				if i == 3 {
					break
				}
				out = append(out, class+": "+w.Summary+"\n  "+strings.Join(w.Lines(res.TimeOriginNs), "\n  "))
			}
		}
		return out
	}
	for _, w := range r.Summary.Consistency.Witnesses {
		in := ""
		if w.Dir != "" {
			in = " (" + w.Dir + ")"
		}
		out = append(out, w.Class+in+": "+w.Summary+"\n  "+strings.Join(w.Lines, "\n  "))
	}
	return out
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

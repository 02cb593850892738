package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"replab/internal/history"
)

// Result is the verdict on a history; its JSON is check.json.
type Result struct {
	// TransactionsChecked counts the committed transactions in the
	// dependency graph: ok ones and info ones whose writes were observed.
	TransactionsChecked int `json:"transactions_checked"`
	// Operations counts the history's operations by outcome.
	Operations OpCounts `json:"operations"`
	// Keys counts the keys by kind.
	Keys KeyCounts `json:"keys"`
	// Anomalies counts every anomaly found, by class.
	Anomalies map[string]int `json:"anomalies"`
	// Witnesses keeps the first few anomalies of each class (Options.
	// MaxWitnesses), each with what a person needs to follow it.
	Witnesses map[string][]Witness `json:"witnesses"`
	// ModelsSatisfied and ModelsViolated list every model of Models and
	// SessionModels, strongest first.
	ModelsSatisfied []string `json:"models_satisfied"`
	ModelsViolated  []string `json:"models_violated"`
	// StrongestSatisfied and WeakestViolated name models of the lattice
	// (Models), or "none".
	StrongestSatisfied string `json:"strongest_satisfied"`
	WeakestViolated    string `json:"weakest_violated"`
	// The session guarantees, reported beside the models.
	SessionGuaranteesSatisfied []string `json:"session_guarantees_satisfied"`
	SessionGuaranteesViolated  []string `json:"session_guarantees_violated"`
	// InfoUndecided counts info operations with writes of which no read
	// observed any: whether they committed is unknown, and they are left
	// out of the graph.
	InfoUndecided int `json:"info_undecided"`
	// Skipped says what was not checked, and why. Empty when everything
	// was.
	Skipped []string `json:"skipped"`
	// Complete is false when something was skipped: a model listed as
	// satisfied is then satisfied by the part checked.
	Complete bool `json:"complete"`
	// TimeOriginNs is the history's first invocation: witnesses print
	// times as seconds after it.
	TimeOriginNs int64 `json:"time_origin_ns"`
	// HistoryCutShort is set when the history's last line was incomplete
	// (the rest was checked).
	HistoryCutShort *CutShort `json:"history_cut_short"`
}

// OpCounts counts operations by outcome; Skipped are those not checked
// (another f than "txn", or beyond the budget).
type OpCounts struct {
	OK      int `json:"ok"`
	Fail    int `json:"fail"`
	Info    int `json:"info"`
	Skipped int `json:"skipped"`
}

// KeyCounts counts the keys of each kind.
type KeyCounts struct {
	List     int `json:"list"`
	Register int `json:"register"`
}

// CutShort is history.CutShort in check.json.
type CutShort struct {
	AfterOps int    `json:"after_ops"`
	Line     int    `json:"line"`
	Message  string `json:"message"`
}

// Witness is one anomaly with its evidence.
type Witness struct {
	Class string `json:"class"`
	// Summary is one line saying what happened.
	Summary string `json:"summary"`
	// Txns are the transactions involved: a cycle's in cycle order.
	Txns []Txn `json:"txns"`
	// Edges are a cycle's dependencies, each with why it exists (empty
	// for anomalies that are not cycles).
	Edges []Edge `json:"edges,omitempty"`
	// Details explain an anomaly that is not a cycle, line by line.
	Details []string `json:"details,omitempty"`
}

// Txn is a transaction as a witness shows it.
type Txn struct {
	Index      int           `json:"index"`
	Process    int           `json:"process"`
	Node       string        `json:"node"`
	Type       history.Type  `json:"type"`
	InvokeNs   int64         `json:"invoke_ns"`
	CompleteNs int64         `json:"complete_ns"`
	TxnType    string        `json:"txn_type,omitempty"`
	Value      []history.Mop `json:"value"`
}

// Edge is one dependency of a cycle, between transactions named by index.
type Edge struct {
	From int `json:"from"`
	To   int `json:"to"`
	// Type is ww, wr, rw, process or realtime.
	Type string `json:"type"`
	// Why is the evidence, e.g. "T12 read key 7 as [1 2], T40 appended 3
	// to key 7, the next version after T12's read".
	Why string `json:"why"`
}

func newResult() *Result {
	return &Result{Anomalies: map[string]int{}, Witnesses: map[string][]Witness{}, Skipped: []string{}, Complete: true}
}

// add counts an anomaly and keeps its witness while there is room.
func (r *Result) add(max int, w Witness) {
	r.Anomalies[w.Class]++
	if len(r.Witnesses[w.Class]) < max {
		r.Witnesses[w.Class] = append(r.Witnesses[w.Class], w)
	}
}

// skip records something not checked.
func (r *Result) skip(format string, args ...any) {
	r.Skipped = append(r.Skipped, fmt.Sprintf(format, args...))
	r.Complete = false
}

// Classes are the classes found, in the order they are listed.
func (r *Result) Classes() []string {
	var cs []string
	for c, n := range r.Anomalies {
		if n > 0 {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		ri, rj := classRank(cs[i]), classRank(cs[j])
		if ri != rj {
			return ri < rj
		}
		return cs[i] < cs[j]
	})
	return cs
}

// Valid reports whether no anomaly was found (session guarantees
// included).
func (r *Result) Valid() bool { return len(r.Classes()) == 0 }

// WriteJSON writes the result as check.json's content.
func (r *Result) WriteJSON(w io.Writer) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "T1 -rw-> T2" stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode check result: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write check result: %w", err)
	}
	return nil
}

// WriteJSONFile writes the result to path atomically (a temporary file,
// then a rename).
func (r *Result) WriteJSONFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".check-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := r.WriteJSON(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

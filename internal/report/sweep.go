package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"replab/internal/stats"
)

// Sweep is sweep.json: one row per combination of swept values.
type Sweep struct {
	Name       string       `json:"name"`
	Complete   bool         `json:"complete"`
	Parameters []string     `json:"parameters"`
	Points     []SweepPoint `json:"points"`
}

// SweepPoint is one combination and its headline figures.
type SweepPoint struct {
	Label   string         `json:"label"`
	Values  map[string]any `json:"values"`
	Dir     string         `json:"dir"`
	Summary *HeadlineFigs  `json:"summary,omitempty"`
}

// HeadlineFigs are the columns of a sweep table.
type HeadlineFigs struct {
	Complete        bool               `json:"complete"`
	TPM             float64            `json:"tpm"`
	TPMCI           *stats.CI          `json:"tpm_ci,omitempty"`
	CommitP50Ms     float64            `json:"commit_latency_p50_ms"`
	CommitP99Ms     float64            `json:"commit_latency_p99_ms"`
	LagP50Ms        map[string]float64 `json:"lag_p50_ms,omitempty"`
	LagP99Ms        map[string]float64 `json:"lag_p99_ms,omitempty"`
	NotVisibleAtEnd int64              `json:"not_visible_at_end"`
	Errors          int64              `json:"errors"`
	Transactions    int64              `json:"transactions"`
	// A page-read run's pages per second and share of slow pages.
	PagesPerS *float64 `json:"pages_per_s,omitempty"`
	SlowShare *float64 `json:"slow_share,omitempty"`
	// A saturation search's knee and exhaust point (users or
	// transactions per second; absent when there was none) and what ran
	// out; the other figures are the knee step's.
	Knee      *float64 `json:"knee,omitempty"`
	Exhausted *float64 `json:"exhausted_at,omitempty"`
	RanOut    string   `json:"ran_out,omitempty"`
	// MachineBound: the point measured this machine (Summary.MachineBound).
	MachineBound bool `json:"machine_bound,omitempty"`
	// TypeP50Ms: each transaction type's commit latency p50 (a read's
	// and a write's apart).
	TypeP50Ms map[string]float64 `json:"type_p50_ms,omitempty"`
	// Reads at replicas (stale_reads): each replica's stale share and the
	// share its lag predicts.
	StaleShare     map[string]float64 `json:"stale_share,omitempty"`
	PredictedShare map[string]float64 `json:"predicted_share,omitempty"`
	// The history's check: transactions checked and anomalies by class;
	// the conflicts the replication counted; tables left diverged.
	Checked              *int64           `json:"transactions_checked,omitempty"`
	Anomalies            map[string]int64 `json:"anomalies,omitempty"`
	ReplicationConflicts *int64           `json:"replication_conflicts,omitempty"`
	DivergedTables       *int             `json:"diverged_tables,omitempty"`
	DivergedRows         *int64           `json:"diverged_rows,omitempty"`
	// CI: with repetitions, the intervals of the figures above the table
	// shows (summary.json "ci" keys: commit latency, lag, stale and
	// predicted shares, the rates per 10,000 transactions).
	CI map[string]stats.CI `json:"ci,omitempty"`
}

// Headline extracts a sweep row from a summary.
func Headline(s *Summary) *HeadlineFigs {
	h := &HeadlineFigs{Complete: s.Complete, TPM: s.TPM, TPMCI: s.TPMCI, CommitP50Ms: s.CommitLatency.P50, CommitP99Ms: s.CommitLatency.P99,
		LagP50Ms: map[string]float64{}, LagP99Ms: map[string]float64{}, Errors: s.Errors, Transactions: s.Transactions, MachineBound: s.MachineBound}
	if s.Pages != nil {
		pps, share := s.Pages.PagesPerS, s.Pages.Slow.SlowShare
		h.PagesPerS, h.SlowShare = &pps, &share
	}
	if sr := s.Search; sr != nil {
		// The final bracket: refined by probes, or the steps'.
		if k := sr.Knee(); k != nil {
			h.Knee = &k.Load
		}
		if e := sr.Exhaust(); e != nil {
			h.Exhausted = &e.Load
		}
		h.RanOut = sr.Resource
		if sr.ExhaustResource != "" {
			h.RanOut = sr.ExhaustResource
		}
	}
	for n, r := range s.Replicas {
		h.LagP50Ms[n] = r.LagMs.P50
		h.LagP99Ms[n] = r.LagMs.P99
		h.NotVisibleAtEnd += r.NotVisibleAtEnd
	}
	if len(s.Types) > 1 {
		h.TypeP50Ms = map[string]float64{}
		for n, t := range s.Types {
			if t != nil && t.Count > 0 {
				h.TypeP50Ms[n] = t.LatencyMs.P50
			}
		}
	}
	if st := s.StaleReads; st != nil {
		for n, ns := range st.Nodes {
			if st.Roles[n] != "replica" || ns.Reads == 0 {
				continue
			}
			if h.StaleShare == nil {
				h.StaleShare, h.PredictedShare = map[string]float64{}, map[string]float64{}
			}
			h.StaleShare[n] = ns.StaleShare
			if ns.Predicted != nil {
				h.PredictedShare[n] = ns.Predicted.Share
			}
		}
	}
	if c := s.Consistency; c != nil && c.Error == "" {
		n := c.TransactionsChecked
		h.Checked, h.Anomalies = &n, c.Anomalies
	}
	if rc := s.ReplicationConflicts; rc != nil && rc.Counted != "" {
		n := rc.Count
		h.ReplicationConflicts = &n
	}
	for k, ci := range s.CI {
		if ci.Bounded() && headlineCIKey(k) {
			if h.CI == nil {
				h.CI = map[string]stats.CI{}
			}
			h.CI[k] = ci
		}
	}
	if cv := s.Convergence; cv != nil && cv.Error == "" {
		d := cv.DivergedTables
		h.DivergedTables = &d
		if cv.DivergedRows != nil {
			r := *cv.DivergedRows
			h.DivergedRows = &r
		}
	}
	return h
}

// PrintSweep writes the sweep table: a row per combination, a column per
// swept parameter, then the headline figures (like the seed studies'
// tables).
func PrintSweep(w io.Writer, sw *Sweep) {
	for _, p := range sw.Points {
		if p.Summary != nil && p.Summary.PagesPerS != nil {
			printPageSweep(w, sw)
			return
		}
	}
	var replicas []string
	seen := map[string]bool{}
	for _, p := range sw.Points {
		if p.Summary == nil {
			continue
		}
		for n := range p.Summary.LagP50Ms {
			if !seen[n] {
				seen[n] = true
				replicas = append(replicas, n)
			}
		}
	}
	sort.Strings(replicas)
	searched := false
	for _, p := range sw.Points {
		searched = searched || p.Summary != nil && (p.Summary.Knee != nil || p.Summary.Exhausted != nil)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := append([]string{}, sw.Parameters...)
	if searched {
		head = append(head, "knee", "exhausted at")
	}
	head = append(head, "tpm", "commit p50 ms", "commit p99 ms")
	types, stale, checked, conflicts, diverged := sweepExtras(sw)
	for _, t := range types {
		head = append(head, t+" p50 ms")
	}
	for _, r := range replicas {
		head = append(head, "lag "+r+" p50 ms", "lag "+r+" p99 ms")
	}
	for _, r := range stale {
		head = append(head, "stale "+r+" %", "predicted %")
	}
	if checked {
		head = append(head, "anomalies /10k", "lost updates /10k")
	}
	if conflicts {
		head = append(head, "conflicts /10k")
	}
	if diverged {
		head = append(head, "diverged")
	}
	head = append(head, "not visible", "errors", "")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, p := range sw.Points {
		var row []string
		for _, k := range sw.Parameters {
			v, ok := p.Values[k]
			if !ok {
				row = append(row, "-")
				continue
			}
			row = append(row, fmt.Sprint(v))
		}
		h := p.Summary
		if h == nil {
			row = append(row, "failed")
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
			continue
		}
		if searched {
			row = append(row, loadOrDash(h.Knee), loadOrDash(h.Exhausted))
		}
		tpm := fmt.Sprintf("%.0f", h.TPM)
		if h.TPMCI != nil && h.TPMCI.N > 1 {
			tpm = fmt.Sprintf("%.0f ± %.0f", h.TPM, h.TPMCI.HalfWidth)
		}
		row = append(row, tpm, h.pm("commit_latency_ms.p50", fmt.Sprintf("%.2f", h.CommitP50Ms), "%.2f", 1),
			h.pm("commit_latency_ms.p99", fmt.Sprintf("%.2f", h.CommitP99Ms), "%.2f", 1))
		for _, t := range types {
			row = append(row, dashOr(h.TypeP50Ms, t, "%.2f", 1))
		}
		for _, r := range replicas {
			k := "replicas." + r + ".lag_ms."
			row = append(row, h.pm(k+"p50", fmt.Sprintf("%.2f", h.LagP50Ms[r]), "%.2f", 1), h.pm(k+"p99", fmt.Sprintf("%.2f", h.LagP99Ms[r]), "%.2f", 1))
		}
		for _, r := range stale {
			k := "stale_reads.nodes." + r + "."
			row = append(row, h.pm(k+"stale_share", dashOr(h.StaleShare, r, "%.3f", 100), "%.3f", 100),
				h.pm(k+"predicted.share", dashOr(h.PredictedShare, r, "%.3f", 100), "%.3f", 100))
		}
		if checked {
			row = append(row, h.pm(ciAnomaliesPer10k, per10k(h.Checked, sumAnomalies(h.Anomalies)), "%.1f", 1),
				h.pm(ciLostPer10k, per10k(h.Checked, h.Anomalies["lost-update"]), "%.1f", 1))
		}
		if conflicts {
			if h.ReplicationConflicts != nil {
				row = append(row, h.pm(ciConflictsPer10k, per10k(&h.Transactions, *h.ReplicationConflicts), "%.1f", 1))
			} else {
				row = append(row, "—")
			}
		}
		if diverged {
			row = append(row, divergedText(h))
		}
		row = append(row, fmt.Sprint(h.NotVisibleAtEnd), fmt.Sprint(h.Errors), pointMark(h))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	if searched {
		fmt.Fprintln(w, "knee: the highest load that still scaled (tpm and latency are its); exhausted at: the first that did not")
		for _, p := range sw.Points {
			if p.Summary != nil && p.Summary.RanOut != "" {
				fmt.Fprintf(w, "  %s ran out: %s\n", p.Label, p.Summary.RanOut)
			}
		}
	}
}

// pointMark flags a point the table cannot be read from as it stands: one
// that did not finish, one that measured this machine rather than the lab.
func pointMark(h *HeadlineFigs) string {
	var m []string
	if !h.Complete {
		m = append(m, "incomplete")
	}
	if h.MachineBound {
		m = append(m, "machine-bound")
	}
	return strings.Join(m, ", ")
}

// sweepExtras says which optional columns the sweep's points have: the
// transaction types (two or three), the replicas with stale reads, a
// checked history, conflicts counted, a convergence check.
func sweepExtras(sw *Sweep) (types, stale []string, checked, conflicts, diverged bool) {
	ts, ss := map[string]bool{}, map[string]bool{}
	for _, p := range sw.Points {
		h := p.Summary
		if h == nil {
			continue
		}
		for t := range h.TypeP50Ms {
			ts[t] = true
		}
		for r := range h.StaleShare {
			ss[r] = true
		}
		checked = checked || h.Checked != nil
		conflicts = conflicts || h.ReplicationConflicts != nil
		diverged = diverged || h.DivergedTables != nil
	}
	if len(ts) >= 2 && len(ts) <= 3 {
		types = sortedKeys(ts)
	}
	return types, sortedKeys(ss), checked, conflicts, diverged
}

func dashOr(m map[string]float64, k, format string, scale float64) string {
	v, ok := m[k]
	if !ok {
		return "—"
	}
	return fmt.Sprintf(format, v*scale)
}

func sumAnomalies(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// headlineCIKey says whether a summary.json "ci" key is one the sweep
// table shows with its interval.
func headlineCIKey(k string) bool {
	p := strings.Split(k, ".")
	switch {
	case k == ciAnomaliesPer10k, k == ciLostPer10k, k == ciConflictsPer10k,
		k == "commit_latency_ms.p50", k == "commit_latency_ms.p99":
		return true
	case len(p) == 4 && p[0] == "replicas" && p[2] == "lag_ms":
		return p[3] == "p50" || p[3] == "p99"
	case len(p) == 4 && p[0] == "stale_reads" && p[1] == "nodes":
		return p[3] == "stale_share"
	case len(p) == 5 && p[0] == "stale_reads" && p[1] == "nodes":
		return p[3] == "predicted" && p[4] == "share"
	}
	return false
}

// pm is a cell with its interval: the mean ± the half-width when the
// repetitions gave one for key (scaled as the cell is), else text.
func (h *HeadlineFigs) pm(key, text, format string, scale float64) string {
	ci, ok := h.CI[key]
	if !ok || !ci.Bounded() {
		return text
	}
	return fmt.Sprintf(format+" ± "+format, ci.Mean*scale, ci.HalfWidth*scale)
}

// per10k is n per 10,000 transactions checked.
func per10k(checked *int64, n int64) string {
	if checked == nil || *checked == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", float64(n)*1e4/float64(*checked))
}

func divergedText(h *HeadlineFigs) string {
	switch {
	case h.DivergedTables == nil:
		return "—"
	case h.DivergedRows != nil:
		return fmt.Sprintf("%d rows", *h.DivergedRows)
	case *h.DivergedTables == 0:
		return "no"
	}
	return fmt.Sprintf("%d tables", *h.DivergedTables)
}

// loadOrDash prints a search's load, or "—" when there is none.
func loadOrDash(x *float64) string {
	if x == nil {
		return "—"
	}
	return fmt.Sprintf("%g", *x)
}

// printPageSweep is the sweep table of page reads: pages per second, the
// page time and the share of slow pages.
func printPageSweep(w io.Writer, sw *Sweep) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := append(append([]string{}, sw.Parameters...), "pages/s", "page p50 ms", "page p99 ms", "slow pages %", "errors", "")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, p := range sw.Points {
		var row []string
		for _, k := range sw.Parameters {
			v, ok := p.Values[k]
			if !ok {
				v = "-"
			}
			row = append(row, fmt.Sprint(v))
		}
		h := p.Summary
		switch {
		case h == nil:
			row = append(row, "failed")
		case h.PagesPerS == nil:
			row = append(row, "no pages")
		default:
			row = append(row, fmt.Sprintf("%.2f", *h.PagesPerS), fmt.Sprintf("%.1f", h.CommitP50Ms), fmt.Sprintf("%.1f", h.CommitP99Ms),
				fmt.Sprintf("%.1f", 100**h.SlowShare), fmt.Sprint(h.Errors), pointMark(h))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
}

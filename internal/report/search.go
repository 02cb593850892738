package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Search is a saturation search ([run] search): the same lab measured at
// rising load until a step is exhausted, then, refined, at loads between
// the knee and the exhaust point. search.json holds it; the search's
// summary.json is the final knee's (a step's or a probe's), with it inside.
type Search struct {
	By string `json:"by"` // "users" or "rate" (transactions per second)
	// The rule: a step is exhausted when its throughput rose by less than
	// MinEfficiency of the load's relative rise over the step before, its
	// commit p99 passed MaxP99Ms (0: no bound), more than MaxErrorPct of
	// its transactions failed, or it did not complete.
	MinEfficiency float64      `json:"min_efficiency"`
	MaxP99Ms      float64      `json:"max_p99_ms,omitempty"`
	MaxErrorPct   float64      `json:"max_error_pct"`
	Steps         []SearchStep `json:"steps"`
	// KneeStep is the highest step (from 1) that still scaled, 0 when the
	// first did not; ExhaustStep the first that did not, 0 when every
	// step scaled (the configuration was not exhausted: add steps).
	KneeStep    int `json:"knee_step"`
	ExhaustStep int `json:"exhaust_step"`
	// Why the exhaust step is exhausted, and the resource the monitors saw
	// busiest there.
	Why      string `json:"why,omitempty"`
	Resource string `json:"resource,omitempty"`
	// Complete: the search reached an exhaust point or ran every step.
	Complete bool `json:"complete"`
	// Refine holds the probes between the steps' knee and exhaust point
	// ([run] search_refine), in the order measured; each halves the
	// bracket. KneeLoad and ExhaustLoad are the final bracket's loads:
	// the steps' knee and exhaust point when nothing was refined; absent
	// when there is no knee (no exhaust point).
	Refine      []SearchProbe `json:"refine,omitempty"`
	KneeLoad    float64       `json:"knee_load,omitempty"`
	ExhaustLoad float64       `json:"exhaust_load,omitempty"`
	// ExhaustResource is Resource at the final exhaust point when a probe
	// is it (Resource stays the exhaust step's).
	ExhaustResource string `json:"exhaust_resource,omitempty"`
}

// SearchProbe is one load measured between the knee and the exhaust point,
// judged as a step is, against the knee at the time (Against, its load):
// one that scales closes the bracket from below (Closed "knee"), one that
// does not from above ("exhaust"). Closed is empty for a probe the run's
// interruption cut short.
type SearchProbe struct {
	SearchStep
	Against float64 `json:"against"`
	Closed  string  `json:"closed,omitempty"`
}

// Probe closings.
const (
	ClosedKnee    = "knee"
	ClosedExhaust = "exhaust"
)

// Knee is the final knee — the highest load measured that scaled, a step
// or a probe — and Exhaust the final exhaust point; nil when there is
// none.
func (s *Search) Knee() *SearchStep { return s.final(ClosedKnee, s.KneeStep) }

// Exhaust: see Knee.
func (s *Search) Exhaust() *SearchStep { return s.final(ClosedExhaust, s.ExhaustStep) }

func (s *Search) final(closed string, step int) *SearchStep {
	for i := len(s.Refine) - 1; i >= 0; i-- {
		if s.Refine[i].Closed == closed {
			return &s.Refine[i].SearchStep
		}
	}
	if step > 0 && step <= len(s.Steps) {
		return &s.Steps[step-1]
	}
	return nil
}

// SearchStep is one load of a search.
type SearchStep struct {
	Load        float64 `json:"load"` // users, or transactions per second
	Dir         string  `json:"dir"`
	Complete    bool    `json:"complete"`
	TPS         float64 `json:"tps"`
	TPM         float64 `json:"tpm"`
	CommitP99Ms float64 `json:"commit_p99_ms"`
	ErrorPct    float64 `json:"error_pct"`
	// Efficiency is the throughput's relative rise over the step before
	// divided by the load's: 1 scales linearly, 0 is flat (absent for the
	// first step).
	Efficiency *float64 `json:"efficiency,omitempty"`
	Scales     bool     `json:"scales"`
	Why        string   `json:"why,omitempty"`
	// Resources: what the step used of each limited resource, the busiest
	// first (Used is the share of the limit; for I/O wait, seconds waited
	// per second).
	Resources []Resource `json:"resources,omitempty"`
}

// Resource is one limited resource a step used.
type Resource struct {
	What   string  `json:"what"`
	Used   float64 `json:"used"`
	Detail string  `json:"detail"`
}

// PrintSearch writes the search's table and its conclusion.
func PrintSearch(w io.Writer, s *Search) {
	if s == nil {
		return
	}
	unit := "users"
	if s.By == "rate" {
		unit = "tx/s"
	}
	fmt.Fprintf(w, "saturation search by %s: a step is exhausted when throughput rises by less than %.0f %% of the load's rise", s.By, 100*s.MinEfficiency)
	if s.MaxP99Ms > 0 {
		fmt.Fprintf(w, ", commit p99 passes %g ms", s.MaxP99Ms)
	}
	fmt.Fprintf(w, " or more than %g %% of transactions fail\n", s.MaxErrorPct)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ttps\tcommit p99 ms\terrors %%\tefficiency\tbusiest\t\n", unit)
	knee, exhaust := s.Knee(), s.Exhaust()
	for i := range s.Steps {
		st := &s.Steps[i]
		mark := ""
		switch {
		case st == knee:
			mark = "  ← knee"
		case st == exhaust:
			mark = "  ← exhausted"
		case i+1 == s.KneeStep:
			mark = "  ← the steps' knee"
		case i+1 == s.ExhaustStep:
			mark = "  ← the steps' exhaust point"
		}
		searchRow(tw, *st, mark)
	}
	for i := range s.Refine {
		p := &s.Refine[i]
		mark := fmt.Sprintf("  ← probe %d, against %g: ", i+1, p.Against)
		switch {
		case p.Closed == ClosedKnee:
			mark += "scales"
		case p.Closed == ClosedExhaust:
			mark += "exhausted"
		default:
			mark += "interrupted"
		}
		switch &p.SearchStep {
		case knee:
			mark += ", the knee"
		case exhaust:
			mark += ", the exhaust point"
		}
		searchRow(tw, p.SearchStep, mark)
	}
	tw.Flush()
	if len(s.Refine) > 0 && s.KneeStep > 0 && s.ExhaustStep > 0 {
		fmt.Fprintf(w, "refined by %d probes between the steps' knee at %g and exhaust point at %g %s, each judged against the knee before it\n",
			len(s.Refine), s.Steps[s.KneeStep-1].Load, s.Steps[s.ExhaustStep-1].Load, unit)
	}
	switch {
	case exhaust != nil && knee != nil:
		fmt.Fprintf(w, "knee at %g %s; exhausted at %g %s: %s\n", knee.Load, unit, exhaust.Load, unit, exhaust.Why)
	case exhaust != nil:
		fmt.Fprintf(w, "exhausted already at the first step, %g %s: %s\n", s.Steps[0].Load, unit, s.Why)
	case s.Complete:
		fmt.Fprintf(w, "not exhausted: every step scaled, up to %g %s; add higher steps to find the knee\n", s.Steps[len(s.Steps)-1].Load, unit)
	default:
		fmt.Fprintf(w, "the search stopped before an exhaust point (%d steps measured)\n", len(s.Steps))
	}
	switch {
	case s.ExhaustResource != "":
		fmt.Fprintf(w, "ran out: %s\n", s.ExhaustResource)
	case s.Resource != "":
		fmt.Fprintf(w, "ran out: %s\n", s.Resource)
	}
}

// searchRow writes one step's or probe's row.
func searchRow(tw io.Writer, st SearchStep, mark string) {
	eff := "—"
	if st.Efficiency != nil {
		eff = fmt.Sprintf("%.2f", *st.Efficiency)
	}
	busiest := "—"
	if len(st.Resources) > 0 {
		busiest = fmt.Sprintf("%s %.0f %%", st.Resources[0].What, 100*st.Resources[0].Used)
	}
	fmt.Fprintf(tw, "%g\t%.1f\t%.1f\t%.2f\t%s\t%s\t%s\n", st.Load, st.TPS, st.CommitP99Ms, st.ErrorPct, eff, busiest, mark)
}

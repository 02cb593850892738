package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// LinkSearch is a search over one link parameter ([run] search =
// "link[N].rate"): the same lab measured with the parameter set, probe by
// probe, by bisection, until the least rate (largest delay or loss) that
// keeps the bounds is known within the resolution. linksearch.json holds
// it; the search's summary.json is the answer's probe, with it inside.
// Values are in Unit: bit/s, ms or %.
type LinkSearch struct {
	Param     string `json:"param"`     // as the spec writes it: "link[1].rate"
	Direction string `json:"direction"` // "a<->b" (both) or "a->b"
	Unit      string `json:"unit"`
	// Want is "least" (rate: a faster link is better) or "largest"
	// (delay, loss).
	Want       string  `json:"want"`
	RangeLo    float64 `json:"range_lo"`
	RangeHi    float64 `json:"range_hi"`
	Resolution float64 `json:"resolution"`
	// The bounds: every replica's lag p99 (0: none), commit latency p99
	// (0: none), the share of failed transactions.
	MaxLagP99Ms float64     `json:"max_lag_p99_ms,omitempty"`
	MaxP99Ms    float64     `json:"max_p99_ms,omitempty"`
	MaxErrorPct float64     `json:"max_error_pct"`
	Probes      []LinkProbe `json:"probes"`
	// Answer is the best value that kept the bounds (nil: none in the
	// range did); Bracket is the value next to it that did not, the other
	// end of the interval the answer lies in (nil when the whole range
	// kept the bounds). AnswerText and BracketText are them as a spec
	// writes them.
	Answer      *float64 `json:"answer,omitempty"`
	AnswerText  string   `json:"answer_text,omitempty"`
	Bracket     *float64 `json:"bracket,omitempty"`
	BracketText string   `json:"bracket_text,omitempty"`
	Conclusion  string   `json:"conclusion"`
	// Complete: the search ran to its conclusion.
	Complete bool `json:"complete"`
}

// LinkProbe is one setting of the link, measured as a run.
type LinkProbe struct {
	Value       float64 `json:"value"`
	Text        string  `json:"text"` // as a spec writes it: "19200bit"
	Dir         string  `json:"dir"`
	Complete    bool    `json:"complete"`
	TPS         float64 `json:"tps"`
	CommitP99Ms float64 `json:"commit_p99_ms"`
	ErrorPct    float64 `json:"error_pct"`
	// The worst replica: the highest lag p99, and the tracked transactions
	// not visible at the end, over every replica.
	LagP99Ms        *float64 `json:"lag_p99_ms,omitempty"`
	LagReplica      string   `json:"lag_replica,omitempty"`
	NotVisibleAtEnd int64    `json:"not_visible_at_end"`
	Pass            bool     `json:"pass"`
	Why             string   `json:"why,omitempty"`
}

// PrintLinkSearch writes every probe of a link search, in the order they
// were measured, and its answer with the bracket.
func PrintLinkSearch(w io.Writer, s *LinkSearch) {
	if s == nil {
		return
	}
	var bounds []string
	if s.MaxLagP99Ms > 0 {
		bounds = append(bounds, fmt.Sprintf("every replica's lag p99 ≤ %g ms", s.MaxLagP99Ms))
	}
	if s.MaxP99Ms > 0 {
		bounds = append(bounds, fmt.Sprintf("commit p99 ≤ %g ms", s.MaxP99Ms))
	}
	bounds = append(bounds, fmt.Sprintf("errors ≤ %g %%", s.MaxErrorPct))
	fmt.Fprintf(w, "link search over %s (%s): the %s value in [%g, %g] %s, to within %g %s, with ", s.Param, s.Direction, s.Want, s.RangeLo, s.RangeHi, s.Unit, s.Resolution, s.Unit)
	for i, b := range bounds {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprint(w, b)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	param := s.Param[strings.LastIndexByte(s.Param, '.')+1:] // "rate"
	fmt.Fprintf(tw, "probe\t%s\ttps\tcommit p99 ms\tlag p99 ms\terrors %%\tbounds\t\n", param)
	for i, p := range s.Probes {
		lag := "—"
		if p.LagP99Ms != nil {
			lag = fmt.Sprintf("%.1f", *p.LagP99Ms)
		}
		verdict := "kept"
		if !p.Pass {
			verdict = "missed"
		}
		mark := ""
		if s.Answer != nil && p.Value == *s.Answer && p.Pass {
			mark = "  ← answer"
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%s\t%.2f\t%s\t%s\n", i+1, p.Text, p.TPS, p.CommitP99Ms, lag, p.ErrorPct, verdict, mark)
	}
	tw.Flush()
	for i, p := range s.Probes {
		if !p.Pass && p.Why != "" {
			fmt.Fprintf(w, "  probe %d (%s) missed: %s\n", i+1, p.Text, p.Why)
		}
	}
	fmt.Fprintln(w, s.Conclusion)
}

// printLinkSearchHead is PrintSummary's part for a link search: the probes
// and the answer, then the heading of the probe whose figures follow;
// false when no probe's figures follow.
func printLinkSearchHead(w io.Writer, s *LinkSearch) bool {
	PrintLinkSearch(w, s)
	for i, p := range s.Probes {
		if s.Answer != nil && p.Value == *s.Answer && p.Pass {
			fmt.Fprintf(w, "\nthe answer, probe %d (%s, %s):\n", i+1, p.Text, p.Dir)
			return true
		}
	}
	return false
}

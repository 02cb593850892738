package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"replab/internal/report"
	"replab/internal/spec"
)

// linkSearch measures the same lab with one link parameter set probe by
// probe on the running link, by bisection (spec.LinkSearch), each probe
// into probe-NN/ (with repetitions, each probe repeated). It keeps
// linksearch.json up to date after every probe, and returns the summary of
// the answer — the best probe that kept the bounds — with the search in it.
func (r *run) linkSearch(ctx context.Context, dir *report.Dir) (*report.Summary, error) {
	ls := r.s.Run.LinkSearch
	lk := r.s.Links[ls.Link]
	from, to, both := lk.A, lk.B, true
	direction := lk.A + "<->" + lk.B
	switch ls.Dir {
	case spec.LinkForward:
		both, direction = false, lk.A+"->"+lk.B
	case spec.LinkReverse:
		from, to, both, direction = lk.B, lk.A, false, lk.B+"->"+lk.A
	}
	out := newLinkSearch(ls, direction)
	sums := map[float64]*report.Summary{}
	good := ls.Lo
	if ls.HigherIsBetter() {
		good = ls.Hi
	}
	var missed bool // the last probe missed: a replica may still be behind
	probe := func(v float64) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		n := len(out.Probes) + 1
		if missed {
			// A probe that missed its bounds may have left the replicas
			// behind (a slow link's backlog): they catch up at the range's
			// good end, so that the next probe starts where every probe does.
			fmt.Fprintf(r.log, "\nlinks: %s at %s until every replica has caught up\n", direction, ls.Setting(good))
			if err := r.lab.SetLink(from, to, both, []string{ls.Setting(good)}); err != nil {
				return false, fmt.Errorf("set %s: %w", direction, err)
			}
			if err := r.cluster.WaitFlowing(ctx); err != nil {
				return false, fmt.Errorf("replicas catching up before probe %d: %w", n, err)
			}
		}
		if err := r.lab.SetLink(from, to, both, []string{ls.Setting(v)}); err != nil {
			return false, fmt.Errorf("set %s: %w", direction, err)
		}
		name := fmt.Sprintf("probe-%02d", n)
		fmt.Fprintf(r.log, "\n=== link search probe %d: %s %s\n", n, direction, ls.Setting(v))
		sd, err := report.NewDir(filepath.Join(dir.Path, name), "")
		if err != nil {
			return false, err
		}
		sum, err := r.measureInto(ctx, sd)
		p := judgeProbe(ls, v, name, sum, err)
		out.Probes = append(out.Probes, p)
		sums[v] = sum
		missed = !p.Pass
		if werr := dir.WriteJSON("linksearch.json", out); werr != nil {
			return false, werr
		}
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		return p.Pass, nil
	}
	b := bisection{lo: ls.Lo, hi: ls.Hi, resolution: ls.Resolution, higherBetter: ls.HigherIsBetter(), round: ls.Round}
	res, runErr := b.run(probe)
	concludeLinkSearch(out, ls, res, runErr == nil)
	// The link as the spec has it again, for whatever follows.
	if err := r.lab.Shape(); err != nil && runErr == nil {
		runErr = err
	}
	if err := dir.WriteJSON("linksearch.json", out); err != nil && runErr == nil {
		runErr = err
	}
	fmt.Fprintf(r.log, "\nlink search: %d probes measured\n", len(out.Probes))

	// The directory's summary is the answer's (or, when nothing kept the
	// bounds, the range's good end's), with the whole search in it.
	sum := &report.Summary{Kind: "link-search", Name: r.s.Lab.Name, Complete: false, StopReason: "no probe completed"}
	at := good
	if res.found {
		at = res.answer
	}
	if s := sums[at]; s != nil {
		c := *s
		sum = &c
	}
	sum.LinkSearch = out
	if runErr != nil {
		sum.Complete, sum.StopReason = false, stopReason(ctx, runErr)
	}
	r.res, r.probe, r.lagHist = nil, nil, nil
	return sum, errors.Join(runErr, r.writeAll(dir, sum))
}

func newLinkSearch(ls *spec.LinkSearch, direction string) *report.LinkSearch {
	out := &report.LinkSearch{Param: ls.Path(), Direction: direction, Unit: ls.Unit(), Want: "largest",
		RangeLo: ls.Lo, RangeHi: ls.Hi, Resolution: ls.Resolution, MaxErrorPct: ls.MaxErrorPct, Probes: []report.LinkProbe{}}
	if ls.HigherIsBetter() {
		out.Want = "least"
	}
	if ls.MaxLagP99 > 0 {
		out.MaxLagP99Ms = float64(ls.MaxLagP99) / 1e6
	}
	if ls.MaxP99 > 0 {
		out.MaxP99Ms = float64(ls.MaxP99) / 1e6
	}
	return out
}

// judgeProbe applies the bounds to one probe: it keeps them unless it did
// not complete, failed more than MaxErrorPct of its transactions, passed
// the commit latency bound, or — with a lag bound — a replica's lag p99
// passed it, a replica had no lag measured, or a tracked transaction was
// still not visible at the end (its lag is unbounded).
func judgeProbe(ls *spec.LinkSearch, v float64, dir string, sum *report.Summary, err error) report.LinkProbe {
	p := report.LinkProbe{Value: v, Text: ls.Text(v), Dir: dir, Pass: true}
	var noLag []string
	if sum != nil {
		p.Complete = sum.Complete
		p.TPS, p.CommitP99Ms = sum.TPS, sum.CommitLatency.P99
		if n := sum.Transactions + sum.Errors; n > 0 {
			p.ErrorPct = 100 * float64(sum.Errors) / float64(n)
		}
		for _, name := range slices.Sorted(maps.Keys(sum.Replicas)) {
			rep := sum.Replicas[name]
			p.NotVisibleAtEnd += rep.NotVisibleAtEnd
			if rep.LagMs.Count == 0 {
				noLag = append(noLag, name)
				continue
			}
			if p.LagP99Ms == nil || rep.LagMs.P99 > *p.LagP99Ms {
				lag := rep.LagMs.P99
				p.LagP99Ms, p.LagReplica = &lag, name
			}
		}
	}
	lagBound := float64(ls.MaxLagP99) / 1e6
	switch {
	case err != nil || sum == nil || !sum.Complete:
		why := "the run did not complete"
		if sum != nil && sum.StopReason != "" {
			why += ": " + sum.StopReason
		} else if err != nil {
			why += ": " + err.Error()
		}
		p.Pass, p.Why = false, why
	case p.ErrorPct > ls.MaxErrorPct:
		p.Pass, p.Why = false, fmt.Sprintf("%.2f %% of transactions failed (more than %g %%)", p.ErrorPct, ls.MaxErrorPct)
	case ls.MaxP99 > 0 && p.CommitP99Ms > float64(ls.MaxP99)/1e6:
		p.Pass, p.Why = false, fmt.Sprintf("commit latency p99 %.1f ms passed the bound of %g ms", p.CommitP99Ms, float64(ls.MaxP99)/1e6)
	case lagBound > 0 && p.NotVisibleAtEnd > 0:
		p.Pass, p.Why = false, fmt.Sprintf("%d tracked transactions were still not visible at a replica when the run ended: the replicas fell behind", p.NotVisibleAtEnd)
	case lagBound > 0 && len(noLag) > 0:
		p.Pass, p.Why = false, fmt.Sprintf("no lag was measured at %v", noLag)
	case lagBound > 0 && p.LagP99Ms == nil:
		p.Pass, p.Why = false, "no replica's lag was measured: a lag bound needs replicas"
	case lagBound > 0 && *p.LagP99Ms > lagBound:
		p.Pass, p.Why = false, fmt.Sprintf("replication lag p99 %.1f ms at %s passed the bound of %g ms", *p.LagP99Ms, p.LagReplica, lagBound)
	}
	return p
}

// concludeLinkSearch writes the answer and its bracket.
func concludeLinkSearch(out *report.LinkSearch, ls *spec.LinkSearch, res bisectOutcome, complete bool) {
	out.Complete = complete
	out.Answer, out.Bracket, out.AnswerText, out.BracketText = nil, nil, "", ""
	if res.found {
		a := res.answer
		out.Answer, out.AnswerText = &a, ls.Text(a)
	}
	if res.bracketed {
		f := res.fail
		out.Bracket, out.BracketText = &f, ls.Text(f)
	}
	better, worse := "above", "below"
	if !ls.HigherIsBetter() {
		better, worse = "below", "above"
	}
	switch {
	case !complete && !res.found:
		out.Conclusion = fmt.Sprintf("the search stopped after %d probes, before any kept the bounds", len(out.Probes))
	case !complete:
		out.Conclusion = fmt.Sprintf("the search stopped after %d probes; so far %s kept the bounds", len(out.Probes), out.AnswerText)
		if res.bracketed {
			out.Conclusion += " and " + out.BracketText + " did not"
		}
	case !res.found:
		out.Conclusion = fmt.Sprintf("no %s in the range keeps the bounds: even %s, its best end, missed them; widen the range %s %s",
			ls.Param, out.BracketText, better, out.BracketText)
	case !res.bracketed:
		out.Conclusion = fmt.Sprintf("the whole range keeps the bounds, even %s, its worst end: the %s %s lies %s it; widen the range",
			out.AnswerText, out.Want, ls.Param, worse)
	default:
		out.Conclusion = fmt.Sprintf("answer: the %s %s that keeps the bounds is %s, to within %s: %s kept them, %s did not",
			out.Want, ls.Param, out.AnswerText, ls.Text(math.Abs(res.answer-res.fail)), out.AnswerText, out.BracketText)
	}
}

// DescribeLinkSearch says what a spec's link search will do, as replab
// validate prints it: the parameter, the range, the resolution, the
// bounds and the most probes it takes.
func DescribeLinkSearch(s *spec.Spec) string {
	ls := s.Run.LinkSearch
	if ls == nil {
		return ""
	}
	lk := s.Links[ls.Link]
	dir := lk.A + "<->" + lk.B
	switch ls.Dir {
	case spec.LinkForward:
		dir = lk.A + "->" + lk.B
	case spec.LinkReverse:
		dir = lk.B + "->" + lk.A
	}
	want := "largest"
	if ls.HigherIsBetter() {
		want = "least"
	}
	var bounds []string
	if ls.MaxLagP99 > 0 {
		bounds = append(bounds, "every replica's lag p99 ≤ "+ls.MaxLagP99.String())
	}
	if ls.MaxP99 > 0 {
		bounds = append(bounds, "commit p99 ≤ "+ls.MaxP99.String())
	}
	bounds = append(bounds, fmt.Sprintf("errors ≤ %g %%", ls.MaxErrorPct))
	probes := 2
	if ls.Resolution > 0 {
		probes += max(0, int(math.Ceil(math.Log2((ls.Hi-ls.Lo)/ls.Resolution))))
	}
	return fmt.Sprintf("%s (%s): the %s %s in [%s, %s] keeping %s, to within %s: at most %d probes of one run each",
		ls.Path(), dir, want, ls.Param, ls.Text(ls.Lo), ls.Text(ls.Hi), strings.Join(bounds, ", "), ls.Text(ls.Resolution), probes)
}

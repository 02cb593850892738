package runner

import (
	"context"
	"fmt"
	"math"

	"replab/internal/report"
	"replab/internal/spec"
)

// refine narrows a saturation search's bracket ([run] search_refine): it
// probes loads between the knee and the exhaust point, each into
// refine-NN/, until probes were measured or the bracket is one user wide.
// It returns the summary of the final knee, kneeSum when no probe scaled.
func (r *run) refine(ctx context.Context, dir *report.Dir, sr *report.Search, probes int, kneeSum *report.Summary) (*report.Summary, error) {
	measure := func(name string, load float64, knee *report.SearchStep) (*report.SearchStep, *report.Summary, error) {
		fmt.Fprintf(r.log, "\n=== search probe %d of at most %d: %s, between the knee at %s and the exhaust point at %s\n",
			len(sr.Refine)+1, probes, loadText(sr.By, load), loadText(sr.By, sr.KneeLoad), loadText(sr.By, sr.ExhaustLoad))
		st, sum, err := r.searchLoad(ctx, dir, name, load, knee)
		if st != nil && ctx.Err() == nil {
			err = nil // judged: a run that failed is a probe that does not scale
		}
		return st, sum, err
	}
	save := func() error { return dir.WriteJSON("search.json", sr) }
	sum, err := refineSearch(sr, probes, measure, save)
	if sum == nil {
		sum = kneeSum
	}
	return sum, err
}

// loadMeasure measures one load into the directory name and judges it
// against knee. An error means the search must stop: the run was
// interrupted (the step, if any, is still recorded), or its directory
// could not be made (no step).
type loadMeasure func(name string, load float64, knee *report.SearchStep) (*report.SearchStep, *report.Summary, error)

// refineSearch bisects the load between sr's knee step and exhaust step
// with at most probes probes, appending each to sr.Refine and moving
// sr.KneeLoad or sr.ExhaustLoad to it; save is called after each. It
// returns the summary of the last probe that scaled (nil: none did).
func refineSearch(sr *report.Search, probes int, measure loadMeasure, save func() error) (*report.Summary, error) {
	knee := sr.Steps[sr.KneeStep-1]
	resolution, round := refineGrid(sr.By, knee.Load)
	b := bisection{resolution: resolution, round: round, maxProbes: probes}
	var kneeSum *report.Summary
	_, err := b.between(knee.Load, sr.Steps[sr.ExhaustStep-1].Load, func(load float64) (bool, error) {
		st, sum, err := measure(fmt.Sprintf("refine-%02d", len(sr.Refine)+1), load, &knee)
		if st == nil {
			return false, err
		}
		p := report.SearchProbe{SearchStep: *st, Against: knee.Load}
		switch {
		case err != nil: // interrupted: it closes nothing
		case st.Scales:
			p.Closed, knee, kneeSum, sr.KneeLoad = report.ClosedKnee, *st, sum, load
		default:
			p.Closed, sr.ExhaustLoad, sr.ExhaustResource = report.ClosedExhaust, load, ranOut(st.Resources)
		}
		sr.Refine = append(sr.Refine, p)
		if serr := save(); serr != nil && err == nil {
			err = serr
		}
		return st.Scales, err
	})
	return kneeSum, err
}

// refineGrid is the resolution at which a refinement stops and the grid
// its probes are on: whole users, one user apart; rates to a thousandth of
// a transaction per second, 1 % of the knee's rate apart (the noise of a
// step's throughput is larger).
func refineGrid(by string, knee float64) (float64, func(float64) float64) {
	if by == spec.SearchUsers {
		return 1, math.Round
	}
	return knee / 100, func(v float64) float64 { return math.Round(v*1000) / 1000 }
}

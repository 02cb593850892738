package runner

import (
	"context"
	"fmt"
	"path/filepath"

	"replab/internal/report"
	"replab/internal/stats"
)

// repeat measures the same lab several times: rs.Repetitions, or, with a
// confidence target, a pilot of that many and then as many as Jain's
// formula asks for (up to MaxRepetitions). Each measurement goes to
// rep-NN/; the aggregate to dir/summary.json.
func (r *run) repeat(ctx context.Context, dir *report.Dir) (*report.Summary, error) {
	rs := r.s.Run
	target := rs.Repetitions
	var sums []*report.Summary
	var dirs []string
	var runErr error
	needed := 0
	for i := 1; i <= target; i++ {
		name := fmt.Sprintf("rep-%02d", i)
		rd, err := report.NewDir(filepath.Join(dir.Path, name), "")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(r.log, "repetition %d of %d\n", i, target)
		sum, err := r.measure(ctx, rd)
		if werr := r.writeAll(rd, sum); werr != nil && err == nil {
			err = werr
		}
		sums = append(sums, sum)
		dirs = append(dirs, name)
		if err != nil {
			runErr = fmt.Errorf("repetition %d: %w", i, err)
			break
		}
		if i == rs.Repetitions && rs.Confidence > 0 {
			needed = stats.RepetitionsNeeded(tpms(sums), rs.Confidence, rs.RelativeError)
			target = min(max(needed, rs.Repetitions), rs.MaxRepetitions)
			fmt.Fprintf(r.log, "pilot of %d: tpm %.0f ± %.1f%%; %d repetitions reach ±%.0f%% at %.0f%% confidence; running %d\n",
				i, stats.MeanCI(tpms(sums), rs.Confidence).Mean, relHalf(stats.MeanCI(tpms(sums), rs.Confidence)),
				needed, 100*rs.RelativeError, 100*rs.Confidence, target)
		}
	}
	agg := report.Aggregate(sums, dirs, level(rs.Confidence))
	agg.RepetitionsNeeded = needed
	if runErr != nil {
		agg.Complete = false
		agg.StopReason = stopReason(ctx, runErr)
	}
	r.res, r.probe, r.lagHist = nil, nil, nil // the aggregate has no series of its own
	if err := r.writeAll(dir, agg); err != nil && runErr == nil {
		runErr = err
	}
	return agg, runErr
}

func level(conf float64) float64 {
	if conf == 0 {
		return 0.95
	}
	return conf
}

func tpms(sums []*report.Summary) []float64 {
	var x []float64
	for _, s := range sums {
		if s.Complete {
			x = append(x, s.TPM)
		}
	}
	return x
}

func relHalf(ci stats.CI) float64 {
	if ci.Mean == 0 {
		return 0
	}
	return 100 * ci.HalfWidth / ci.Mean
}

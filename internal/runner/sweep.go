package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"replab/internal/driver"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/stats"
)

// runSweep runs every point of the spec's sweep in turn, each in its own
// lab (parameters may change the lab itself), into pNN/ directories, and
// keeps sweep.json up to date after each point so an interrupted sweep
// still shows what it measured.
func runSweep(ctx context.Context, s *spec.Spec, opt Options, dir *report.Dir) error {
	points, err := s.Points() // Run validated every point already
	if err != nil {
		return err
	}
	sw := &report.Sweep{Name: s.Lab.Name}
	for _, p := range s.Sweep {
		sw.Parameters = append(sw.Parameters, p.Path)
	}
	var errs []error
	for i, p := range points {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		name := fmt.Sprintf("p%02d", i+1)
		fmt.Fprintf(opt.Log, "\n=== sweep point %d of %d: %s\n", i+1, len(points), p.Label)
		pd, err := report.NewDir(filepath.Join(dir.Path, name), "")
		if err != nil {
			return err
		}
		eng, wl, _ := check(p.Spec, opt, true)
		sum, err := runPoint(ctx, p.Spec, opt, eng, wl, pd)
		pt := report.SweepPoint{Label: p.Label, Values: p.Values, Dir: name}
		if sum != nil {
			pt.Summary = report.Headline(sum)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep point %s: %w", p.Label, err))
		}
		sw.Points = append(sw.Points, pt)
		if werr := dir.WriteJSON("sweep.json", sw); werr != nil {
			errs = append(errs, werr)
		}
	}
	sw.Complete = len(sw.Points) == len(points) && len(errs) == 0
	if werr := dir.WriteJSON("sweep.json", sw); werr != nil {
		errs = append(errs, werr)
	}
	fmt.Fprintln(opt.Log)
	report.PrintSweep(opt.Log, sw)
	return errors.Join(errs...)
}

// steadiness checks the measure phase's per-second throughput.
func steadiness(series []driver.Second) *stats.Steadiness {
	var x []float64
	for _, s := range series {
		if s.Phase == driver.Measure {
			x = append(x, float64(s.Commits))
		}
	}
	if len(x) < 3 {
		return nil
	}
	st := stats.CheckSteady(x)
	return &st
}

package benchkit

import (
	"context"
	"time"

	"replab/internal/lab"
	"replab/internal/spec"
)

// StartLab is lab.Up made robust for repeated benchmarks: a failed start
// is reported, its leftovers removed with lab.Down, and the start tried
// once more. Each attempt has a minute.
func StartLab(ctx context.Context, s *spec.Spec, logf func(format string, args ...any)) (*lab.Lab, error) {
	name := s.Lab.Name
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		l, err := lab.Up(actx, s, lab.Options{NoControl: true})
		cancel()
		if err == nil || attempt == 2 || ctx.Err() != nil {
			return l, err
		}
		logf("      warning: start lab %s: %v; removing its leftovers and trying once more", name, err)
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, derr := lab.Down(dctx, lab.DefaultStateRoot, name); derr != nil {
			logf("      warning: lab down %s: %v", name, derr)
		}
		cancel()
	}
}

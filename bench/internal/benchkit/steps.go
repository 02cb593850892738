package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Step is one bounded measurement.
type Step struct {
	ID    string // for -only
	Title string
	Limit time.Duration
	Run   func(ctx context.Context) error
}

// PrintSteps lists the steps for -list, ids padded to idWidth.
func PrintSteps(steps []Step, idWidth int) {
	for _, s := range steps {
		fmt.Printf("%-*s %s\n", idWidth, s.ID, s.Title)
	}
}

// SelectSteps keeps the steps named in only (comma-separated ids), in
// their normal order. When only is empty it keeps the steps named in
// defaults, or all of them when defaults is nil.
func SelectSteps(all []Step, only string, defaults []string) ([]Step, error) {
	if only == "" {
		if defaults == nil {
			return all, nil
		}
		only = strings.Join(defaults, ",")
	}
	var ids []string
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	want := strings.Split(only, ",")
	for _, w := range want {
		if !slices.Contains(ids, w) {
			return nil, fmt.Errorf("no step %q (steps: %s)", w, strings.Join(ids, ", "))
		}
	}
	var out []Step
	for _, s := range all {
		if slices.Contains(want, s.ID) {
			out = append(out, s)
		}
	}
	return out, nil
}

// SignalContext returns a context that the first Ctrl-C (or SIGTERM)
// cancels, so the running step cleans up; a second one ends the process
// at once (default signal behaviour). prog names the program in the log
// line. Call stop when done.
func SignalContext(prog string, logf func(format string, args ...any)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sigc
		if !ok {
			return
		}
		signal.Stop(sigc)
		logf("%s: %v: cleaning up (interrupt again to abort without cleaning up)", prog, s)
		cancel(fmt.Errorf("interrupted by %v", s))
	}()
	return ctx, func() {
		signal.Stop(sigc)
		close(sigc)
		cancel(nil)
	}
}

// RunSteps runs each step under its time limit, recording its time and
// CPU use (measured with meter) in r.Steps and its failure in r.Errors;
// it stops early when ctx ends.
func RunSteps[E any](ctx context.Context, r *Report[E], steps []Step, meter func() CPUMeter, logf func(format string, args ...any)) {
	for i, s := range steps {
		if ctx.Err() != nil {
			break
		}
		logf("[%d/%d] %s …", i+1, len(steps), s.Title)
		t0, m := time.Now(), meter()
		sctx, cancelStep := context.WithTimeoutCause(ctx, s.Limit, fmt.Errorf("step took longer than its limit %s", s.Limit))
		err := s.Run(sctx)
		cancelStep()
		r.Steps = append(r.Steps, StepInfo{ID: s.ID, Title: s.Title, Seconds: Round(time.Since(t0).Seconds(), 1),
			CPU: m.Read(), OK: err == nil})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			logf("      FAILED after %s: %v", time.Since(t0).Round(100*time.Millisecond), err)
			r.Errors = append(r.Errors, StepError{Step: s.Title, Error: err.Error()})
			continue
		}
		logf("      done in %s", time.Since(t0).Round(100*time.Millisecond))
	}
}

// StartCPUProfile writes a Go CPU profile of this process to path until
// stop is called.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// Finish ends a run that started at start: unless ctx ended (then nothing
// is written), it lets end complete the environment, writes r to out as
// JSON and prints the summary to stdout. It returns the exit code: 130
// when interrupted, 1 when writing or a step failed, else 0.
func Finish[E any](ctx context.Context, r *Report[E], prog, out string, start time.Time, end func(*E), summary func(io.Writer), logf func(format string, args ...any)) int {
	if ctx.Err() != nil {
		logf("%s: interrupted; nothing written to %s", prog, out)
		return 130
	}
	end(&r.Environment)
	r.Seconds = Round(time.Since(start).Seconds(), 1)
	if err := WriteJSON(out, r); err != nil {
		logf("%s: %v", prog, err)
		return 1
	}
	fmt.Println()
	summary(os.Stdout)
	fmt.Printf("\nwrote %s in %s\n", out, time.Since(start).Round(time.Second))
	if len(r.Errors) > 0 {
		return 1
	}
	return 0
}

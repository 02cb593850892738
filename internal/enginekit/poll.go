package enginekit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Bringing up nodes: a fan-out over them, and a poller that waits for a
// state.

// Each runs f for every item at once and joins their errors (in items'
// order).
func Each[T any](items []T, f func(T) error) error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(it)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Poll waits for a state: it calls a check every Interval until the check
// reports done. It gives up when the context ends, when the check fails
// with an error Permanent says will not go away by asking again, or when
// the state the check describes has not changed for Stall — a long copy
// over a slow link is fine as long as it moves.
type Poll struct {
	Interval time.Duration // default 20 ms
	Stall    time.Duration // default 60 s
	// CheckTimeout bounds one check; default 10 s.
	CheckTimeout time.Duration
	// Permanent reports errors not worth retrying; nil: none is.
	Permanent func(error) bool
	// Log, when set, receives the state every LogEvery while waiting.
	Log      func(state string)
	LogEvery time.Duration // default 10 s
}

// Until polls check; it returns the last state seen.
func (p Poll) Until(ctx context.Context, check func(ctx context.Context) (done bool, state string, err error)) (string, error) {
	if p.Interval <= 0 {
		p.Interval = 20 * time.Millisecond
	}
	if p.Stall <= 0 {
		p.Stall = time.Minute
	}
	if p.CheckTimeout <= 0 {
		p.CheckTimeout = 10 * time.Second
	}
	if p.LogEvery <= 0 {
		p.LogEvery = 10 * time.Second
	}
	var last string
	var lastErr error
	changed, reported := time.Now(), time.Now()
	for {
		cctx, cancel := context.WithTimeout(ctx, p.CheckTimeout)
		done, state, err := check(cctx)
		cancel()
		switch {
		case err == nil && done:
			return state, nil
		case err != nil && p.Permanent != nil && p.Permanent(err):
			return last, err
		case err != nil:
			lastErr = err
		case state != last:
			last, changed = state, time.Now()
		}
		if time.Since(changed) > p.Stall {
			if last == "" && lastErr != nil {
				return last, fmt.Errorf("no answer within %s: %w", p.Stall, lastErr)
			}
			return last, fmt.Errorf("no progress within %s (%s)", p.Stall, last)
		}
		if p.Log != nil && last != "" && time.Since(reported) > p.LogEvery {
			p.Log(last)
			reported = time.Now()
		}
		select {
		case <-ctx.Done():
			if last == "" {
				return last, ctx.Err()
			}
			return last, fmt.Errorf("%w (%s)", ctx.Err(), last)
		case <-time.After(p.Interval):
		}
	}
}

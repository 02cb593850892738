package driver

import (
	"context"
	"time"
)

func (u *user) closedLoop(ctx context.Context) {
	for ctx.Err() == nil {
		start := u.d.cfg.Now()
		if start >= u.d.end.Load() {
			return
		}
		counted, ok := u.d.claim(start)
		if !ok {
			// The count is taken: wait for the measure phase to end
			// (its last transactions finishing, or the duration).
			t := time.NewTimer(time.Duration(u.d.measureEnd.Load() - start))
			select {
			case <-ctx.Done():
			case <-u.d.measureDone:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		u.do(ctx, start)
		if counted {
			u.d.finish()
		}
		if think := u.think(); think > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(think):
			}
		}
	}
}

func (u *user) think() time.Duration {
	lo, hi := u.d.cfg.ThinkMin, u.d.cfg.ThinkMax
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(u.r.Int64N(int64(hi-lo)+1))
}

func (u *user) openLoop(ctx context.Context, s *scheduler) {
	for {
		select {
		case <-ctx.Done():
			return
		case intended, ok := <-s.jobs:
			if !ok {
				return
			}
			now := u.d.cfg.Now()
			s.drain(now) // this user could have sent the skipped ones now, at the earliest
			u.d.rec.behind(now-intended, u.d.phaseAt(intended) == Measure)
			u.do(ctx, intended)
		}
	}
}

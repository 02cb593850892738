package monitor

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand, with the monitor's timers
// on it: a sample is taken exactly when the test's time reaches its
// deadline, however busy the machine is.
type fakeClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	timers []*fakeTimer
	resets int // Reset and Stop calls on every timer so far
}

type fakeTimer struct {
	clk   *fakeClock
	c     chan time.Time
	at    time.Time
	armed bool
}

func newFakeClock(t0 time.Time) *fakeClock {
	c := &fakeClock{now: t0}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since is the time elapsed on the clock since t.
func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *fakeClock) newTimer() timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clk: c, c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.cond.Broadcast()
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	select { // as time.Timer since Go 1.23: no stale value after Reset
	case <-t.c:
	default:
	}
	t.at, t.armed = c.now.Add(max(d, 0)), true
	c.resets++
	c.cond.Broadcast()
}

func (t *fakeTimer) Stop() {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	t.armed = false
	c.resets++
	c.cond.Broadcast()
}

// waitArmed waits until n timers exist and all are armed: the samplers
// are waiting for their first deadline.
func (c *fakeClock) waitArmed(t *testing.T, n int) {
	t.Helper()
	c.wait(t, "timers armed", func() bool {
		if len(c.timers) < n {
			return false
		}
		for _, tm := range c.timers {
			if !tm.armed {
				return false
			}
		}
		return true
	})
}

// afterReset runs f, then waits until some timer was reset or stopped
// (a sampler took f's news into account).
func (c *fakeClock) afterReset(t *testing.T, f func()) {
	t.Helper()
	c.mu.Lock()
	n := c.resets
	c.mu.Unlock()
	f()
	c.wait(t, "a timer reset", func() bool { return c.resets != n })
}

// advance moves the clock to target, firing every timer due on the way
// in deadline order. After firing one it waits until that timer is armed
// again (its sampler has taken the sample and is waiting for the next
// one), so samples happen one at a time at their exact deadlines.
func (c *fakeClock) advance(t *testing.T, target time.Time) {
	t.Helper()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, tm := range c.timers {
			if tm.armed && !tm.at.After(target) && (next == nil || tm.at.Before(next.at)) {
				next = tm
			}
		}
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		c.now = next.at
		next.armed = false
		next.c <- c.now // never blocks: Reset emptied it, and it fires once per arming
		n := c.resets
		c.mu.Unlock()
		c.wait(t, "the sampler to take its sample", func() bool { return c.resets != n })
	}
}

// wait waits for cond (checked under c.mu); a sampler that never answers
// fails the test instead of hanging it.
func (c *fakeClock) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	stop := time.AfterFunc(time.Minute, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	deadline := time.Now().Add(time.Minute)
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("fake clock: waited a minute for %s", what)
		}
		c.cond.Wait()
	}
}

// Package clock is the one clock of a lab: CLOCK_MONOTONIC in nanoseconds,
// shared by every link model, the driver and the lag probe (so lag needs no
// clock-skew correction), and a sleeper that wakes on its absolute
// deadlines within microseconds.
package clock

import (
	"context"
	"runtime"
	"time"
	_ "unsafe" // for go:linkname

	"golang.org/x/sys/unix"
)

// nanotime is the runtime's CLOCK_MONOTONIC reading (vDSO, ~20 ns). Using
// the same clock as clock_nanosleep lets the sleeper wake on absolute
// deadlines computed from its readings.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in nanoseconds.
func Now() int64 { return nanotime() }

// coarseLead is how long before a deadline the sleeper stops using Go
// timers and switches to clock_nanosleep. Go timers ride the netpoller,
// whose waits have millisecond granularity: measured here they fire p50
// 0.7 ms and p99 2-3 ms late, so the lead must exceed that. The cost is a
// thread blocked in the kernel (not spinning) for the last few ms.
const coarseLead = 5 * time.Millisecond

// Sleeper waits for absolute deadlines on Now's clock precisely. Use it
// from a goroutine that called LockThread.
type Sleeper struct {
	timer *time.Timer
}

// NewSleeper makes a sleeper.
func NewSleeper() *Sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Sleeper{timer: t}
}

// Until returns at deadline (Now ns), or earlier when wake fires or done
// closes while still in the coarse phase. It returns false when done was
// closed. wake and done may be nil.
func (s *Sleeper) Until(deadline int64, wake <-chan struct{}, done <-chan struct{}) bool {
	if d := time.Duration(deadline-Now()) - coarseLead; d > 0 {
		s.timer.Reset(d)
		select {
		case <-s.timer.C:
		case <-wake:
			s.timer.Stop()
			return true
		case <-done:
			s.timer.Stop()
			return false
		}
	}
	if deadline-Now() > 0 {
		ts := unix.NsecToTimespec(deadline)
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
		}
	}
	return true
}

// UntilCtx is Until with a context: false as soon as ctx ends while still
// in the coarse phase, or when it has ended by the deadline.
func (s *Sleeper) UntilCtx(ctx context.Context, deadline int64) bool {
	return s.Until(deadline, nil, ctx.Done()) && ctx.Err() == nil
}

// LockThread pins the goroutine to its OS thread and sets that thread's
// timer slack to 1 ns, so clock_nanosleep wakes within microseconds; with
// nice ≠ 0 it also sets the thread's nice value (when allowed: root), for a
// thread that must keep its schedule on a saturated machine. The returned
// function restores both and unpins.
func LockThread(nice int) (unlock func()) {
	runtime.LockOSThread()
	oldSlack, serr := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	tid := unix.Gettid()
	oldNice, nerr := 0, error(nil)
	if nice != 0 {
		if oldNice, nerr = unix.Getpriority(unix.PRIO_PROCESS, tid); nerr == nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
		}
	}
	return func() {
		if serr == nil && oldSlack > 0 {
			_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(oldSlack), 0, 0, 0)
		}
		if nice != 0 && nerr == nil {
			// getpriority(2) returns 20 - nice.
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 20-oldNice)
		}
		runtime.UnlockOSThread()
	}
}

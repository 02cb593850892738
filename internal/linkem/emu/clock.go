package emu

import (
	"runtime"
	"time"
	_ "unsafe" // for go:linkname

	"golang.org/x/sys/unix"
)

// nanotime is the runtime's CLOCK_MONOTONIC reading (vDSO, ~20 ns). Using
// the same clock as clock_nanosleep lets the precise sleeper wake on
// absolute deadlines computed from packet timestamps.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in nanoseconds: the clock every link model
// in a lab runs on.
func Now() int64 { return nanotime() }

// coarseLead is how long before a deadline the sleeper stops using Go
// timers and switches to clock_nanosleep. Go timers ride the netpoller,
// whose waits have millisecond granularity: measured here they fire p50
// 0.7 ms and p99 2-3 ms late, so the lead must exceed that. The cost is a
// thread blocked in the kernel (not spinning) for the last few ms.
const coarseLead = 5 * time.Millisecond

// sleeper waits for absolute deadlines precisely. It must be used from a
// goroutine that called lockThread.
type sleeper struct {
	timer *time.Timer
}

// lockThread pins the goroutine to its OS thread and sets that thread's
// timer slack to 1 ns so clock_nanosleep wakes within microseconds.
func lockThread() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
}

func newSleeper() *sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sleeper{timer: t}
}

// sleepUntil returns at deadline (CLOCK_MONOTONIC ns), or earlier when wake
// fires or done closes while still in the coarse phase. It returns false
// when done was closed.
func (s *sleeper) sleepUntil(deadline int64, wake <-chan struct{}, done <-chan struct{}) bool {
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
		for {
			err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
			if err != unix.EINTR {
				break
			}
		}
	}
	return true
}

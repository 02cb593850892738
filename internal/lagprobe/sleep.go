package lagprobe

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/linkem/emu"
)

// coarseLead is how long before a deadline the sleeper stops using Go
// timers (they ride the netpoller and wake up to ~3 ms late) and switches
// to clock_nanosleep. The same scheme and lead as emu's packet sleeper.
const coarseLead = 5 * time.Millisecond

// sleeper waits for absolute CLOCK_MONOTONIC deadlines within a few
// microseconds. Use it from a goroutine that called lockThread.
type sleeper struct {
	timer *time.Timer
}

func newSleeper() *sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sleeper{timer: t}
}

// watcherNice is the watcher thread's nice value while it watches: on a
// machine the workload saturates, a poll due every millisecond otherwise
// waits behind the servers and the driver for its turn on a CPU, and the
// achieved interval drifts above the configured one. The thread sleeps
// most of the time, so this costs the others little.
const watcherNice = -10

// lockThread pins the goroutine to its OS thread, sets that thread's
// timer slack to 1 ns so clock_nanosleep wakes within microseconds, and
// raises its priority (when allowed: root). The returned function
// restores both and unpins.
func lockThread() (unlock func()) {
	runtime.LockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	tid := unix.Gettid()
	oldNice, nerr := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if nerr == nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, watcherNice)
	}
	return func() {
		if err == nil && old > 0 {
			_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		}
		if nerr == nil {
			// getpriority(2) returns 20 - nice.
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 20-oldNice)
		}
		runtime.UnlockOSThread()
	}
}

// until returns at deadline (emu.Now ns), or false as soon as ctx ends
// while still in the coarse phase.
func (s *sleeper) until(ctx context.Context, deadline int64) bool {
	if d := time.Duration(deadline-emu.Now()) - coarseLead; d > 0 {
		s.timer.Reset(d)
		select {
		case <-s.timer.C:
		case <-ctx.Done():
			s.timer.Stop()
			return false
		}
	}
	if deadline-emu.Now() > 0 {
		ts := unix.NsecToTimespec(deadline)
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
		}
	}
	return ctx.Err() == nil
}

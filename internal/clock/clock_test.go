package clock

import (
	"context"
	"replab/internal/testkit"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLockThreadSetsAndRestoresPriority: the thread runs at the nice value
// asked for while locked, and at its old one afterwards. getpriority(2)
// reports 20 - nice.
func TestLockThreadSetsAndRestoresPriority(t *testing.T) {
	testkit.Need(t, testkit.Root)
	runtime.LockOSThread() // keep one thread for before and after
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	before, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	unlock := LockThread(-10)
	during, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
	unlock()
	after, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if during != 20-(-10) || after != before {
		t.Errorf("nice before %d, while locked %d (want -10), after %d", 20-before, 20-during, 20-after)
	}
}

// TestSleeperNeverWakesEarly: a precise sleep may be late on a busy
// machine, never early.
func TestSleeperNeverWakesEarly(t *testing.T) {
	defer LockThread(0)()
	s := NewSleeper()
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 2 * time.Millisecond, 7 * time.Millisecond} {
		deadline := Now() + int64(d)
		if !s.UntilCtx(context.Background(), deadline) {
			t.Fatalf("sleep of %s reported a cancelled context", d)
		}
		if now := Now(); now < deadline {
			t.Errorf("sleep of %s woke %d ns early", d, deadline-now)
		}
	}
}

// TestSleeperStopsWhenCancelled: a long sleep ends with false as soon as
// its context is cancelled.
func TestSleeperStopsWhenCancelled(t *testing.T) {
	defer LockThread(0)()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if NewSleeper().UntilCtx(ctx, Now()+int64(time.Hour)) {
		t.Error("a cancelled hour-long sleep reported success")
	}
}

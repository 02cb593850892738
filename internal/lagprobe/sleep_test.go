package lagprobe

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLockThreadRaisesAndRestoresPriority: the watcher's thread runs at
// nice watcherNice while locked, and at its old nice value afterwards.
// getpriority(2) reports 20 - nice.
func TestLockThreadRaisesAndRestoresPriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising a thread's priority needs root")
	}
	runtime.LockOSThread() // keep one thread for before and after
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	before, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	unlock := lockThread()
	during, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
	unlock()
	after, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if during != 20-watcherNice || after != before {
		t.Errorf("nice before %d, while watching %d (want %d), after %d", 20-before, 20-during, watcherNice, 20-after)
	}
}

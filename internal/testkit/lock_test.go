package testkit

import (
	"os"
	"testing"
	"time"
)

// withLockDir points the lock files at a directory of the test's own.
func withLockDir(t *testing.T) {
	old := lockDir
	lockDir = t.TempDir()
	t.Cleanup(func() { lockDir = old })
}

func nolog(string, ...any) {}

// take acquires in the background; the channel gets the file once held.
func take(m mode) <-chan *os.File {
	ch := make(chan *os.File, 1)
	go func() {
		f, err := acquire(nolog, m)
		if err != nil {
			panic(err)
		}
		ch <- f
	}()
	return ch
}

// pending says whether ch is still waiting after a moment. A waiter that
// is let in early fails the test; one that is slow to wake cannot pass
// by luck, since every later check waits for it without a bound.
func pending(ch <-chan *os.File) bool {
	select {
	case f := <-ch:
		f.Close()
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func TestSharedHoldersRunTogether(t *testing.T) {
	withLockDir(t)
	a, b := <-take(shared), <-take(shared) // both get it: this would hang otherwise
	a.Close()
	b.Close()
}

func TestExclusiveWaitsForSharedAndSharedWaitsForIt(t *testing.T) {
	withLockDir(t)
	s1 := <-take(shared)
	ex := take(exclusive)
	if !pending(ex) {
		t.Fatal("the exclusive lock was taken while a shared one was held")
	}
	// A shared request after the exclusive one waits too: the writer is
	// not overtaken.
	s2 := take(shared)
	if !pending(s2) {
		t.Fatal("a shared lock overtook a waiting exclusive one")
	}
	s1.Close()
	x := <-ex
	if !pending(s2) {
		t.Fatal("a shared lock was taken while the exclusive one was held")
	}
	x.Close()
	(<-s2).Close()
}

func TestSubtestsShareTheirParentsLock(t *testing.T) {
	withLockDir(t)
	hold(t, exclusive)
	t.Run("sub", func(t *testing.T) {
		hold(t, shared) // held by the parent: would wait forever if taken again
		hold(t, exclusive)
	})
	mu.Lock()
	h := held[t.Name()]
	mu.Unlock()
	if h == nil || h.mode != exclusive {
		t.Fatalf("the parent's lock after its subtest: %+v", h)
	}
}

func TestAloneTakesTheMachineForTheMeasurementOnly(t *testing.T) {
	withLockDir(t)
	hold(t, shared)
	other := <-take(shared) // beside t's setup: shared
	var waited bool
	done := make(chan struct{})
	go func() {
		Alone(t, func() { // waits for other to go
			waited = true
			if s := take(shared); !pending(s) {
				t.Error("a shared lock was taken during the measurement")
			} else {
				go func() { (<-s).Close() }()
			}
		})
		close(done)
	}()
	if !pendingDone(done) {
		t.Fatal("the measurement ran beside another test's shared lock")
	}
	other.Close()
	<-done
	if !waited {
		t.Fatal("the measurement did not run")
	}
	mu.Lock()
	h := held[t.Name()]
	mu.Unlock()
	if h == nil || h.mode != shared {
		t.Fatalf("after the measurement t holds %+v, want the shared lock again", h)
	}
	(<-take(shared)).Close() // shared again: another test gets in
}

func pendingDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

package testkit

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startOn starts a child (sleep) from a goroutine locked to a thread of
// its own (not the main thread, which Go never retires) that ends locked,
// so Go retires that thread, as the lab's emulator retires its delivery
// threads; start is how the child is started.
func startOn(t *testing.T, start func(*exec.Cmd) (<-chan struct{}, error)) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	type res struct {
		exited <-chan struct{}
		err    error
	}
	ch := make(chan res, 1)
	onMain := make(chan struct{}, 1)
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	for {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			if syscall.Gettid() == syscall.Getpid() {
				// Go never retires the main thread: keep it, try again.
				onMain <- struct{}{}
				<-held
				runtime.UnlockOSThread()
				return
			}
			exited, err := start(cmd)
			ch <- res{exited, err}
		}()
		select {
		case <-onMain:
			continue
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-r.exited
			})
			return cmd, r.exited
		}
	}
}

// retireThreads makes many goroutines take a thread each and end locked to
// it: every thread idle in Go's pool, and more, exits.
func retireThreads() {
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() { defer wg.Done(); runtime.LockOSThread(); <-release }()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
}

// TestStartTiedOutlivesTheThreadsThatStartedIt: a child started with
// Pdeathsig from an ordinary thread is killed when that thread exits
// (the reason StartTied exists); one started by StartTied lives on while
// the threads of the caller and many others exit.
func TestStartTiedOutlivesTheThreadsThatStartedIt(t *testing.T) {
	bare := func(cmd *exec.Cmd) (<-chan struct{}, error) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		return done, nil
	}
	cmd, exited := startOn(t, bare)
	select {
	case <-exited:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the bare child ended with %v, want killed by its Pdeathsig", cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Error("a child started with Pdeathsig outlived the thread that forked it: the kernel no longer ties it to the thread")
	}

	cmd, exited = startOn(t, StartTied)
	retireThreads()
	select {
	case <-exited:
		t.Fatalf("the tied child died when threads of the test binary exited: %v", cmd.ProcessState)
	case <-time.After(300 * time.Millisecond):
	}
	// And it does end when asked: exited is closed after its exit.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if cmd.ProcessState == nil {
			t.Error("exited closed before the child was waited for")
		}
	case <-time.After(10 * time.Second):
		t.Error("the tied child did not exit on SIGTERM")
	}
}

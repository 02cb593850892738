package testkit

import (
	"os/exec"
	"runtime"
	"syscall"
)

// StartTied starts cmd so that it is killed (SIGKILL) when the test binary
// dies, and only then; exited is closed once it has exited and been
// waited for (cmd.ProcessState is then set).
//
// Pdeathsig alone does not do that: the kernel sends it when the *thread*
// that forked the child exits, not the process (prctl(2)), and Go retires
// a thread whenever a goroutine ends locked to it — the lab's emulator
// does at the end of every lab (emu's deliver loops). A server forked from
// whatever thread a test's goroutine was on then dies in the middle of
// the test, when a lab of another test in the same binary closes. Here the
// fork happens on a thread locked for the child's whole life.
func StartTied(cmd *exec.Cmd) (exited <-chan struct{}, err error) {
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		// The child is gone: the thread may serve others again.
		runtime.UnlockOSThread()
		close(done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

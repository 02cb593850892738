package enginekit

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"replab/internal/lab"
)

// Proc is one run of a server process started in a site and reaped in the
// background.
type Proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited and been reaped
}

// StartProc starts cmd in site.
func StartProc(site *lab.Site, cmd *exec.Cmd) (*Proc, error) {
	if err := site.Start(cmd); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// PID is the process's id while it runs; 0 once it has exited (or for a
// nil Proc: never started).
func (p *Proc) PID() int {
	if p == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitStatus says how the process ended ("exit status 1", "signal:
// killed"); "" while it runs.
func (p *Proc) ExitStatus() string {
	if p == nil {
		return "" // never started
	}
	select {
	case <-p.exited:
		if st := p.cmd.ProcessState; st != nil {
			return st.String()
		}
		return "unknown"
	default:
		return ""
	}
}

// Signal sends sig and waits until the process exits or ctx ends. A
// stopped (paused) process is continued first: it would not act on the
// signal.
func (p *Proc) Signal(ctx context.Context, sig syscall.Signal) error {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Freeze pauses (SIGSTOP) or, with pause false, resumes (SIGCONT) node's
// process and says so in log: Pauser for engines whose node is one
// process.
func (p *Proc) Freeze(log io.Writer, node string, pause bool) error {
	pid := p.PID()
	if pid == 0 {
		return fmt.Errorf("node %s is not running", node)
	}
	sig, what := syscall.SIGSTOP, "paused"
	if !pause {
		sig, what = syscall.SIGCONT, "resumed"
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	fmt.Fprintf(log, "node %s: %s\n", node, what)
	return nil
}

// Stop asks the process to exit with sig and kills it if it has not within
// timeout (StopServer).
func (p *Proc) Stop(sig syscall.Signal, timeout time.Duration) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	StopServer(p.cmd, p.exited, sig, timeout)
}

// StopServer asks a server to shut down with sig and kills it if it has
// not exited (exited closed) within timeout.
func StopServer(cmd *exec.Cmd, exited <-chan struct{}, sig syscall.Signal, timeout time.Duration) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

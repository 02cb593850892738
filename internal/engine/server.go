package engine

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"time"

	"replab/internal/lab"
)

// What engines that run servers in a lab's sites share.

// ServerUser runs every database server of every lab (lab.ServerUser).
const ServerUser = lab.ServerUser

// ServerCredentials returns the uid and gid of ServerUser, creating the
// user if it is missing (lab.ServerCredentials).
func ServerCredentials(ctx context.Context) (uid, gid int, err error) {
	return lab.ServerCredentials(ctx)
}

// MkdirOwned creates dir (0700) owned by uid:gid.
func MkdirOwned(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// AsUser makes cmd run as uid:gid, from /, with a minimal environment.
func AsUser(cmd *exec.Cmd, uid, gid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin", "LC_ALL=C", "HOME=/nonexistent"}
}

// NodeAddresses gives every node of the lab's spec the address it listens
// on: its site's address, and its own port or the next free one from
// defaultPort in that site.
func NodeAddresses(l *lab.Lab, defaultPort int) (map[string]netip.AddrPort, error) {
	ports := map[string]int{} // site -> next port
	used := map[netip.AddrPort]string{}
	out := map[string]netip.AddrPort{}
	for _, sn := range l.Spec.Nodes {
		site := l.Site(sn.Site)
		if site == nil {
			return nil, fmt.Errorf("node %s: no site %s", sn.Name, sn.Site)
		}
		port := sn.Port
		if port == 0 {
			if ports[sn.Site] == 0 {
				ports[sn.Site] = defaultPort
			}
			port = ports[sn.Site]
			ports[sn.Site]++
		}
		ap := netip.AddrPortFrom(site.Address, uint16(port))
		if other, dup := used[ap]; dup {
			return nil, fmt.Errorf("nodes %s and %s both listen on %s: give one a different port", other, sn.Name, ap)
		}
		used[ap] = sn.Name
		for ports[sn.Site] != 0 && used[netip.AddrPortFrom(site.Address, uint16(ports[sn.Site]))] != "" {
			ports[sn.Site]++
		}
		out[sn.Name] = ap
	}
	return out, nil
}

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

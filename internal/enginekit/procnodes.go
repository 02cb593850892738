package enginekit

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"
)

// ProcServer is a node whose server is one process (its roles are
// threads), as a MariaDB or an XRootD node.
type ProcServer interface {
	// Proc is the server's process: nil before the first start.
	Proc() *Proc
	// StartServer runs the server again on the node's data and waits
	// until it answers.
	StartServer(ctx context.Context) error
	// Disconnect closes the engine's own connections to the node before
	// it is signalled (they would break anyway).
	Disconnect()
}

// ProcNodes is node control (NodeControl) and pausing (Pauser) for an
// engine whose nodes are ProcServers; the engine's cluster embeds it. A
// stopped or killed node keeps its data, and Start runs it again there.
type ProcNodes struct {
	Log     io.Writer
	StopSig syscall.Signal // a clean shutdown
	// Node finds a node by name; the error names the nodes there are.
	Node func(name string) (ProcServer, error)
}

// Stop implements NodeControl: StopSig, waiting until the server exits.
func (p *ProcNodes) Stop(ctx context.Context, name string) error {
	return p.signal(ctx, name, p.StopSig, "stopped")
}

// Kill implements NodeControl: SIGKILL, waiting until the server is gone.
func (p *ProcNodes) Kill(ctx context.Context, name string) error {
	return p.signal(ctx, name, syscall.SIGKILL, "killed")
}

func (p *ProcNodes) signal(ctx context.Context, name string, sig syscall.Signal, what string) error {
	n, err := p.Node(name)
	if err != nil {
		return err
	}
	if n.Proc().PID() == 0 {
		return fmt.Errorf("node %s is not running", name)
	}
	n.Disconnect()
	if err := n.Proc().Signal(ctx, sig); err != nil {
		return fmt.Errorf("node %s: not %s: %w", name, what, err)
	}
	fmt.Fprintf(p.Log, "node %s: %s\n", name, what)
	return nil
}

// Start implements NodeControl.
func (p *ProcNodes) Start(ctx context.Context, name string) error {
	n, err := p.Node(name)
	if err != nil {
		return err
	}
	if n.Proc().PID() != 0 {
		return fmt.Errorf("node %s is already running", name)
	}
	start := time.Now()
	if err := n.StartServer(ctx); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	fmt.Fprintf(p.Log, "node %s: started again (%.2f s)\n", name, time.Since(start).Seconds())
	return nil
}

// Restart implements NodeControl.
func (p *ProcNodes) Restart(ctx context.Context, name string) error {
	if err := p.Stop(ctx, name); err != nil {
		return err
	}
	return p.Start(ctx, name)
}

// Pause implements Pauser: SIGSTOP, a server that hangs with its
// connections open.
func (p *ProcNodes) Pause(ctx context.Context, name string) error {
	n, err := p.Node(name)
	if err != nil {
		return err
	}
	return n.Proc().Freeze(p.Log, name, true)
}

// Resume implements Pauser.
func (p *ProcNodes) Resume(ctx context.Context, name string) error {
	n, err := p.Node(name)
	if err != nil {
		return err
	}
	return n.Proc().Freeze(p.Log, name, false)
}

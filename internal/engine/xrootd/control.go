package xrootd

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"replab/internal/engine"
)

// Node control (engine.NodeControl, engine.Pauser): a stopped or killed
// node keeps its data set, and Start runs xrootd again on it; clients see
// their connection reset and must connect again.

func (c *cluster) controlled(name string) (*node, error) {
	n := c.byName[name]
	if n == nil {
		return nil, engine.NoSuchNode(name, c.Nodes())
	}
	return n, nil
}

// Stop implements engine.NodeControl.
func (c *cluster) Stop(ctx context.Context, name string) error {
	return c.signal(ctx, name, syscall.SIGTERM, "stopped")
}

// Kill implements engine.NodeControl.
func (c *cluster) Kill(ctx context.Context, name string) error {
	return c.signal(ctx, name, syscall.SIGKILL, "killed")
}

func (c *cluster) signal(ctx context.Context, name string, sig syscall.Signal, what string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.pid() == 0 {
		return fmt.Errorf("node %s is not running", name)
	}
	if err := n.proc.Load().Signal(ctx, sig); err != nil {
		return fmt.Errorf("node %s: not %s: %w", name, what, err)
	}
	fmt.Fprintf(c.log, "node %s: %s\n", name, what)
	return nil
}

// Start implements engine.NodeControl.
func (c *cluster) Start(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.pid() != 0 {
		return fmt.Errorf("node %s is already running", name)
	}
	start := time.Now()
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	fmt.Fprintf(c.log, "node %s: started again (%.2f s)\n", name, time.Since(start).Seconds())
	return nil
}

// Restart implements engine.NodeControl.
func (c *cluster) Restart(ctx context.Context, name string) error {
	if err := c.Stop(ctx, name); err != nil {
		return err
	}
	return c.Start(ctx, name)
}

// Pause implements engine.Pauser: SIGSTOP to the server (one process: its
// roles are threads), a server that hangs with its connections open.
func (c *cluster) Pause(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	return n.proc.Load().Freeze(c.log, name, true)
}

// Resume implements engine.Pauser.
func (c *cluster) Resume(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	return n.proc.Load().Freeze(c.log, name, false)
}

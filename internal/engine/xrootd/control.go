package xrootd

import (
	"context"
	"syscall"

	"replab/internal/enginekit"
)

// Node control (engine.NodeControl, engine.Pauser, through
// enginekit.ProcNodes): a stopped or killed node keeps its data set, and
// Start runs xrootd again on it; clients see their connection reset and
// must connect again.

// procNodes is the cluster's node control.
func (c *cluster) procNodes() enginekit.ProcNodes {
	return enginekit.ProcNodes{Log: c.log, StopSig: syscall.SIGTERM, Node: func(name string) (enginekit.ProcServer, error) {
		n := c.byName[name]
		if n == nil {
			return nil, enginekit.NoSuchNode(name, c.Nodes())
		}
		return n, nil
	}}
}

// Proc implements enginekit.ProcServer.
func (n *node) Proc() *enginekit.Proc { return n.proc.Load() }

// Disconnect implements enginekit.ProcServer: replab holds no connection.
func (n *node) Disconnect() {}

// StartServer implements enginekit.ProcServer.
func (n *node) StartServer(ctx context.Context) error { return n.start(ctx) }

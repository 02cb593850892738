package xrootd

import (
	"context"
	"syscall"

	"replab/internal/engine"
)

// Node control (engine.NodeControl, engine.Pauser, through
// engine.ProcNodes): a stopped or killed node keeps its data set, and
// Start runs xrootd again on it; clients see their connection reset and
// must connect again.

// procNodes is the cluster's node control.
func (c *cluster) procNodes() engine.ProcNodes {
	return engine.ProcNodes{Log: c.log, StopSig: syscall.SIGTERM, Node: func(name string) (engine.ProcServer, error) {
		n := c.byName[name]
		if n == nil {
			return nil, engine.NoSuchNode(name, c.Nodes())
		}
		return n, nil
	}}
}

// Proc implements engine.ProcServer.
func (n *node) Proc() *engine.Proc { return n.proc.Load() }

// Disconnect implements engine.ProcServer: replab holds no connection.
func (n *node) Disconnect() {}

// StartServer implements engine.ProcServer.
func (n *node) StartServer(ctx context.Context) error { return n.start(ctx) }

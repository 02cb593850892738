package mariadb

import (
	"context"
	"syscall"

	"replab/internal/enginekit"
)

// Node control (engine.NodeControl, engine.Pauser, through
// enginekit.ProcNodes): a stopped or killed node keeps its data directory,
// and Start runs mariadbd again on it (after a kill, InnoDB recovers from
// its redo log; a replica resumes from its GTID position by itself).

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

// Disconnect implements enginekit.ProcServer: the admin pool.
func (n *node) Disconnect() { n.closeAdmin() }

// StartServer implements enginekit.ProcServer. A Galera member starts from
// the position its data directory recovers to.
func (n *node) StartServer(ctx context.Context) error {
	var args []string
	if n.c.plan.replication == Galera {
		pos, err := n.wsrepRecover(ctx)
		if err != nil {
			return err
		}
		if pos != "" {
			args = append(args, "--wsrep_start_position="+pos)
		}
	}
	return n.startWith(ctx, args)
}

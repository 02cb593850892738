package target

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/agent"
	"replab/internal/clock"
	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/spec"
)

// A watcher on the driver's host polls a replica across the network: what
// a poll returns was visible at the replica somewhat before the answer
// arrived. With the path's one-way time taken as half the smallest poll
// round trip seen, the snapshot was taken at most that long before the
// answer came back (if the way back is no faster than the way there), so
// each poll's end is moved back by it. A poll slower than the fastest
// leaves its snapshot anywhere in the extra time: the bound is half the
// spread of poll round trips (99th percentile − minimum).

// seedPolls are the polls a remote reader makes before the watch starts,
// so that the first correction is not a slow first poll's.
const seedPolls = 10

// remoteReader is a LagReader across the network, correcting its times.
type remoteReader struct {
	inner engine.LagReader
	now   func() int64

	mu     sync.Mutex
	minRTT int64                   // ns; 0 before the first poll
	rtts   *hdrhistogram.Histogram // µs
}

func newRemoteReader(ctx context.Context, inner engine.LagReader, writers int) (*remoteReader, error) {
	r := &remoteReader{inner: inner, now: clock.Now, rtts: hdrhistogram.New(1, 600_000_000, 3)}
	dst := make([]int64, max(writers, 1))
	for range seedPolls {
		if _, _, err := r.TimedPositions(ctx, dst); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// TimedPositions implements lagprobe.TimedQuerier.
func (r *remoteReader) TimedPositions(ctx context.Context, dst []int64) (start, end int64, err error) {
	start = r.now()
	err = r.inner.Positions(ctx, dst)
	end = r.now()
	if err != nil {
		return start, end, err
	}
	rtt := end - start
	r.mu.Lock()
	if r.minRTT == 0 || rtt < r.minRTT {
		r.minRTT = max(rtt, 1)
	}
	_ = r.rtts.RecordValue(max(rtt/1000, 1))
	oneWay := r.minRTT / 2
	r.mu.Unlock()
	return start + oneWay, end - oneWay, nil
}

// Positions implements engine.LagReader.
func (r *remoteReader) Positions(ctx context.Context, dst []int64) error {
	_, _, err := r.TimedPositions(ctx, dst)
	return err
}

// Close implements engine.LagReader.
func (r *remoteReader) Close() error { return r.inner.Close() }

// LagBound implements engine.LagBounder.
func (r *remoteReader) LagBound() engine.LagBound {
	r.mu.Lock()
	defer r.mu.Unlock()
	spreadUs := max(r.rtts.ValueAtQuantile(99)-r.minRTT/1000, 0)
	return engine.LagBound{Method: "remote-poll", CorrectionMs: float64(r.minRTT) / 2e6, BoundMs: float64(spreadUs) / 2e3}
}

// LagReader implements engine.LagReaders: through the node's agent when
// the spec names one, else polled from this host.
func (c *Cluster) LagReader(ctx context.Context, node string) (engine.LagReader, error) {
	tn := c.t.Node(node)
	if tn == nil {
		return nil, enginekit.NoSuchNode(node, c.nodes)
	}
	if tn.Agent != "" {
		return c.agentReader(ctx, *tn)
	}
	db, err := c.Open(ctx, node, "")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	inner := &enginekit.SQLLagReader{DB: db, CloseDB: true}
	r, err := newRemoteReader(ctx, inner, 1)
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("node %s: poll %s: %w", c.where(node), enginekit.LagTableName, err)
	}
	return r, nil
}

// agentToken is the token the nodes' agents expect: [target]
// agent_token_file, else REPLAB_AGENT_TOKEN.
func (c *Cluster) agentToken() (string, error) {
	if c.t.AgentTokenFile != "" {
		return readSecret(c.t.AgentTokenFile, "[target] agent_token_file")
	}
	if tok := os.Getenv("REPLAB_AGENT_TOKEN"); tok != "" {
		return tok, nil
	}
	return "", errors.New("nodes have agents, but no token was given: set [target] agent_token_file or REPLAB_AGENT_TOKEN")
}

// checkAgents reads the agents' token and makes sure each agent answers
// and accepts it, before anything is changed.
func (c *Cluster) checkAgents(ctx context.Context) error {
	var agents []spec.TargetNode
	for _, n := range c.t.Nodes {
		if n.Agent != "" {
			agents = append(agents, n)
		}
	}
	if len(agents) == 0 {
		return nil
	}
	tok, err := c.agentToken()
	if err != nil {
		return err
	}
	c.token = tok
	return enginekit.Each(agents, func(n spec.TargetNode) error {
		cl, err := c.dialAgent(ctx, n)
		if err != nil {
			return err
		}
		return cl.Close()
	})
}

// agentReader reads lag at node n through its agent.
func (c *Cluster) agentReader(ctx context.Context, n spec.TargetNode) (engine.LagReader, error) {
	cl, err := c.dialAgent(ctx, n)
	if err != nil {
		return nil, err
	}
	interval := c.run.LagInterval
	if interval <= 0 {
		interval = spec.DefaultLagInterval
	}
	if err := cl.Watch(ctx, c.t.Schema+"."+enginekit.LagTableName, interval); err != nil {
		cl.Close()
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return &agentReader{Client: cl}, nil
}

func (c *Cluster) dialAgent(ctx context.Context, n spec.TargetNode) (*agent.Client, error) {
	cl, err := agent.Dial(ctx, n.Agent, c.token)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return cl, nil
}

// agentReader is an agent's client as an engine.LagReader that says its
// bound.
type agentReader struct {
	*agent.Client
}

// LagBound implements engine.LagBounder.
func (r *agentReader) LagBound() engine.LagBound {
	return engine.LagBound{Method: "agent", CorrectionMs: float64(r.LastOffset()) / 1e6, BoundMs: float64(r.MaxBound()) / 1e6}
}

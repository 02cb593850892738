// Package fake is an engine that runs in the test process: every node is
// an in-memory store that understands a few SQL statements, and changes
// committed at a source reach the nodes that replicate from it after
// crossing the lab's link between their sites (its delay and rate, as the
// link is set at the time: link.go) and a set delay, applied by one
// goroutine (an OS thread of its own) per node.
// It exists so that everything above the engine — the runner's phases,
// retries, the error cut-off, repetitions, sweeps, the monitors and the
// lag probe — can be tested without root, namespaces or servers; it is
// not a stand-in for a database when one is measured. It is also the
// smallest complete example of an engine (docs/extending.md).
//
// Its [scheme] options: delay (how long a change takes to reach a
// replica, per hop; default "2ms"), conflict_every (every Nth commit at a
// source fails as a serialization conflict, SQLSTATE 40001, which clients
// may retry), fail_every (every Nth commit fails for good, XX000) and
// commit_time (each commit at a source holds it this long, one commit at
// a time: a server whose capacity is 1 / commit_time commits a second,
// for a saturation search to find; default 0, none).
package fake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is the fake engine, kind "fake".
type Engine struct{}

// Kind implements engine.Engine.
func (Engine) Kind() string { return "fake" }

// Schemes: primary and standbys, or masters that all take writes.
const (
	Async       = "async"
	Multimaster = "multimaster"
)

// plan is a spec resolved for the fake.
type plan struct {
	replication   string
	delay         time.Duration
	conflictEvery int64
	failEvery     int64
	commitTime    time.Duration
}

// Validate implements engine.Engine.
func (Engine) Validate(s *spec.Spec) error {
	_, err := makePlan(s)
	return err
}

func makePlan(s *spec.Spec) (*plan, error) {
	errs := s.NewErrors()
	o := s.SchemeOptions("engine fake")
	p := &plan{
		replication:   s.Scheme.Replication,
		delay:         o.Duration("delay", 2*time.Millisecond, 0, time.Minute),
		conflictEvery: o.Int("conflict_every", 0, 0, 1<<30),
		failEvery:     o.Int("fail_every", 0, 0, 1<<30),
		commitTime:    o.Duration("commit_time", 0, 0, time.Second),
	}
	errs.Join(o.Err())
	if p.replication == "" {
		p.replication = Async
	}
	if p.replication != Async && p.replication != Multimaster {
		errs.Add("scheme.replication", "the fake engine has no scheme %q; schemes: async, multimaster", p.replication)
		return nil, errs.Err()
	}
	sources := 0
	for _, n := range s.Nodes {
		switch {
		case p.replication == Async && n.Role == "master", p.replication == Multimaster && n.Role != "master":
			errs.Add("node."+n.Name+".role", "replication = %q has no %s nodes", p.replication, n.Role)
		case n.Role == "primary" || n.Role == "master":
			sources++
		}
	}
	if p.replication == Async && sources != 1 {
		errs.Add("node", "replication = \"async\" needs exactly one node with role = \"primary\"; found %d", sources)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// cluster is a running set of fake nodes.
type cluster struct {
	plan    *plan
	lab     *lab.Lab // the links between the nodes' sites (link.go)
	links   linkClocks
	log     io.Writer
	nodes   []*node
	byName  map[string]*node
	commits atomic.Int64 // commits at sources, for injected errors
	marker  atomic.Int64
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

var (
	_ engine.SQL             = (*cluster)(nil)
	_ engine.NodeControl     = (*cluster)(nil)
	_ engine.Pauser          = (*cluster)(nil)
	_ engine.ErrorClassifier = (*cluster)(nil)
	_ engine.Checksummer     = (*cluster)(nil)
)

// node is one fake server.
type node struct {
	spec.Node
	c        *cluster
	writable bool
	children []*node // nodes that receive its changes
	ups      []string

	// pause, when not nil, is closed when a paused node resumes: every
	// statement waits on it (a SIGSTOPped server).
	pause atomic.Pointer[chan struct{}]

	// serial is held for commit_time by each commit at a source.
	serial sync.Mutex

	mu   sync.Mutex // guards st and seq; held while a change is forwarded
	st   *store
	seq  int64 // changes committed here
	down atomic.Bool

	// qmu guards queue alone and is taken last (never while waiting for
	// another lock), so masters forwarding to each other cannot deadlock.
	qmu   sync.Mutex
	queue []queued // changes to apply, in order
	wake  chan struct{}

	applied atomic.Int64 // changes applied from upstreams
	pos     atomic.Int64 // the primary's last change applied here (positions.go)
	tid     atomic.Int64 // the applier's OS thread
}

type queued struct {
	due time.Time
	ch  *change
}

// Up implements engine.Engine. The lab may be offline: the fake uses only
// its spec.
func (Engine) Up(ctx context.Context, l *lab.Lab, log io.Writer) (engine.Cluster, error) {
	p, err := makePlan(l.Spec)
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	c := &cluster{plan: p, lab: l, log: log, byName: map[string]*node{}, ctx: bg, stop: stop}
	for _, sn := range l.Spec.Nodes {
		n := &node{Node: sn, c: c, writable: sn.Role == "primary" || sn.Role == "master",
			st: &store{tables: map[string]*table{}}, wake: make(chan struct{}, 1)}
		c.nodes = append(c.nodes, n)
		c.byName[sn.Name] = n
	}
	for _, n := range c.nodes {
		switch {
		case n.From != "":
			up := c.byName[n.From]
			up.children = append(up.children, n)
			n.ups = []string{up.Name}
		case p.replication == Multimaster:
			for _, m := range c.nodes {
				if m != n {
					n.children = append(n.children, m)
					n.ups = append(n.ups, m.Name)
				}
			}
		}
		if err := n.exec(markerDDL); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		c.wg.Add(1)
		go n.applier()
	}
	fmt.Fprintf(log, "fake: %d nodes up (%s, delay %s per hop)\n", len(c.nodes), p.replication, p.delay)
	if err := c.WaitFlowing(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

const markerDDL = "CREATE TABLE replab_marker (source text PRIMARY KEY, seq bigint NOT NULL)"

// exec runs one statement at n outside any transaction, as the engine
// itself (no injected errors).
func (n *node) exec(q string, args ...driver.Value) error {
	s, err := parse(q)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v := &view{st: n.st, overlay: map[string]map[string][]driver.Value{}}
	if _, _, _, err := v.exec(s, args); err != nil {
		return err
	}
	n.commitLocked(v.ops)
	return nil
}

// commitLocked makes ops durable at n and sends them on; n.mu is held.
func (n *node) commitLocked(ops []rowOp) {
	n.st.apply(ops)
	if len(ops) == 0 {
		return
	}
	n.seq++
	ch := &change{origin: n.Name, seq: n.seq, at: time.Now(), ops: ops}
	n.forward(ch)
}

// forward queues a change for n's children: a standby passes on whatever
// it receives (cascading); a master only what was committed at it.
func (n *node) forward(ch *change) {
	for _, k := range n.children {
		if k.Name == ch.origin || (n.c.plan.replication == Multimaster && ch.origin != n.Name) {
			continue
		}
		k.enqueue(ch, n.Site)
	}
}

// enqueue queues a change sent from a node in site from: it is due once
// it has crossed the link from that site (link.go), plus the fake's delay.
func (n *node) enqueue(ch *change, from string) {
	now := time.Now()
	arrive := now
	if p, err := n.c.lab.LinkParams(from, n.Site); err == nil && from != n.Site {
		arrive = n.c.links.cross(from, n.Site, now, ch.size(), p)
	}
	n.qmu.Lock()
	n.queue = append(n.queue, queued{due: arrive.Add(n.c.plan.delay), ch: ch})
	n.qmu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// applier applies n's queue in order, each change once it is due, on an
// OS thread of its own (its CPU time is the node's "apply" role). A node
// that is down applies nothing until it is up again.
func (n *node) applier() {
	defer n.c.wg.Done()
	// The thread is dedicated to this goroutine for its life.
	runtime.LockOSThread()
	n.tid.Store(int64(unix.Gettid()))
	for {
		n.qmu.Lock()
		wait := time.Hour
		if len(n.queue) > 0 && !n.down.Load() {
			wait = time.Until(n.queue[0].due)
		}
		n.qmu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-n.c.ctx.Done():
				t.Stop()
				return
			case <-n.wake:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		_ = n.waitPaused(n.c.ctx)
		n.qmu.Lock()
		q := n.queue[0]
		n.queue = n.queue[1:]
		n.qmu.Unlock()
		n.mu.Lock()
		n.st.apply(q.ch.ops)
		n.forward(q.ch)
		n.mu.Unlock()
		n.applied.Add(1)
		n.appliedPos(q.ch)
	}
}

// Nodes implements engine.Cluster.
func (c *cluster) Nodes() []engine.Node {
	var out []engine.Node
	for i, n := range c.nodes {
		out = append(out, engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, From: n.From,
			Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(40000+i)),
			DSN:  "fake://" + n.Name, Version: "fake", Writable: n.writable, Upstreams: n.ups})
	}
	return out
}

// WaitFlowing implements engine.Cluster: a marker written at every source
// must reach every node that receives from it.
func (c *cluster) WaitFlowing(ctx context.Context) error {
	seq := c.marker.Add(1)
	var srcs []*node
	for _, n := range c.nodes {
		if n.writable {
			if err := n.exec("INSERT INTO replab_marker (source, seq) VALUES ($1, $2) ON CONFLICT (source) DO UPDATE SET seq = EXCLUDED.seq", n.Name, seq); err != nil {
				return err
			}
			srcs = append(srcs, n)
		}
	}
	_, err := enginekit.Poll{Interval: time.Millisecond, Stall: 10*c.plan.delay + 10*time.Second}.Until(ctx, func(context.Context) (bool, string, error) {
		var behind []string
		for _, n := range c.nodes {
			for _, src := range srcs {
				if n != src && n.markerOf(src.Name) < seq {
					behind = append(behind, n.Name+" lacks "+src.Name+"'s marker")
				}
			}
		}
		return len(behind) == 0, strings.Join(behind, ", "), nil
	})
	return err
}

func (n *node) markerOf(src string) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.st.tables["replab_marker"]
	if r, ok := t.rows[norm(src)]; ok {
		v, _ := r[1].(int64)
		return v
	}
	return 0
}

// ReplicationState implements engine.Cluster: each replica's queue of
// changes not yet applied, in transactions.
func (c *cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	var out []engine.ReplicaState
	for _, n := range c.nodes {
		if len(n.ups) == 0 {
			continue
		}
		n.qmu.Lock()
		backlog := int64(len(n.queue))
		n.qmu.Unlock()
		state := "streaming"
		if n.down.Load() {
			state = "down"
		}
		out = append(out, engine.ReplicaState{Node: n.Name, From: strings.Join(n.ups, ","), Kind: c.plan.replication, State: state,
			Backlog: backlog, BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1,
			Positions: []engine.Position{{Name: "applied", Value: strconv.FormatInt(n.applied.Load(), 10)}}})
	}
	return out, nil
}

// Processes implements engine.Cluster: each node's applier thread, a
// thread of this process.
func (c *cluster) Processes(ctx context.Context) ([]engine.Process, error) {
	var out []engine.Process
	for _, n := range c.nodes {
		if tid := n.tid.Load(); tid != 0 && !n.down.Load() {
			out = append(out, engine.Process{Node: n.Name, Role: "apply", PID: os.Getpid(), TID: int(tid), Apply: len(n.ups) > 0})
		}
	}
	return out, nil
}

// Close implements engine.Cluster.
func (c *cluster) Close() error {
	c.stop()
	c.wg.Wait()
	return nil
}

// Dialect implements engine.Dialecter: placeholders are $n.
func (Engine) Dialect() engine.Dialect { return engine.Postgres }

// Dialect implements engine.SQL.
func (c *cluster) Dialect() engine.Dialect { return engine.Postgres }

// Open implements engine.SQL.
func (c *cluster) Open(ctx context.Context, node, fromSite string) (*sql.DB, error) {
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector{n}), nil
}

// ApplySchema implements engine.SQL: every table at every node.
func (c *cluster) ApplySchema(ctx context.Context, s engine.Schema) error {
	for _, n := range c.nodes {
		for _, t := range s.Tables {
			ddl, ok := t.Create[engine.Postgres]
			if !ok {
				return fmt.Errorf("table %s has no postgres definition", t.Name)
			}
			if err := n.exec(ddl); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

// Checksums implements engine.Checksummer: FNV-1a over each table's rows
// in key order. Every node holds a full copy.
func (c *cluster) Checksums(ctx context.Context, tables ...string) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for _, n := range c.nodes {
		n.mu.Lock()
		sums := map[string]int64{}
		for _, name := range tables {
			t := n.st.tables[name]
			if t == nil {
				n.mu.Unlock()
				return nil, fmt.Errorf("node %s: no table %s", n.Name, name)
			}
			h := fnv.New64a()
			for _, k := range slices.Sorted(maps.Keys(t.rows)) {
				fmt.Fprintf(h, "%q=%v\n", k, t.rows[k])
			}
			sums[name] = int64(h.Sum64())
		}
		n.mu.Unlock()
		out[n.Name] = sums
	}
	return out, ctx.Err()
}

// Classify implements engine.ErrorClassifier.
func (c *cluster) Classify(err error) engine.ErrorClass {
	var se *sqlError
	if errors.As(err, &se) {
		return engine.ErrorClass{Code: se.code, Retry: se.code == "40001", Conflict: se.code == "40001"}
	}
	return engine.ErrorClass{}
}

func (c *cluster) node(name string) (*node, error) {
	n := c.byName[name]
	if n == nil {
		return nil, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

// Stop implements engine.NodeControl: the node refuses connections and
// applies nothing until started; what reaches it meanwhile waits.
func (c *cluster) Stop(ctx context.Context, name string) error { return c.setDown(name, true) }

// Kill implements engine.NodeControl (the same as Stop: nothing is lost
// in memory that a crash would lose on disk).
func (c *cluster) Kill(ctx context.Context, name string) error { return c.setDown(name, true) }

// Start implements engine.NodeControl.
func (c *cluster) Start(ctx context.Context, name string) error { return c.setDown(name, false) }

// Restart implements engine.NodeControl.
func (c *cluster) Restart(ctx context.Context, name string) error {
	if err := c.Stop(ctx, name); err != nil {
		return err
	}
	return c.Start(ctx, name)
}

func (c *cluster) setDown(name string, down bool) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.down.Swap(down) == down {
		return fmt.Errorf("node %s is already %s", name, map[bool]string{true: "down", false: "up"}[down])
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return nil
}

// Pause implements engine.Pauser: every statement at the node waits until
// Resume, as at a server stopped with SIGSTOP; its applier waits too.
func (c *cluster) Pause(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	ch := make(chan struct{})
	if !n.pause.CompareAndSwap(nil, &ch) {
		return fmt.Errorf("node %s is already paused", name)
	}
	return nil
}

// Resume implements engine.Pauser: a paused node goes on.
func (c *cluster) Resume(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	ch := n.pause.Swap(nil)
	if ch == nil {
		return fmt.Errorf("node %s is not paused", name)
	}
	close(*ch)
	return nil
}

// waitPaused blocks while the node is paused, or until ctx ends.
func (n *node) waitPaused(ctx context.Context) error {
	if ch := n.pause.Load(); ch != nil {
		select {
		case <-*ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// errDown is what a client of a node that is down gets.
func errDown(n *node) error {
	return &net.OpError{Op: "dial", Net: "fake", Err: fmt.Errorf("node %s is down", n.Name)}
}

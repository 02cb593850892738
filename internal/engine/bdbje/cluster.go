package bdbje

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// flowWriter is the lag stamp WaitFlowing writes: far above any user's
// writer number, so the lag probe never reads it.
const flowWriter = 1 << 30

// masterWait bounds how long a client waits for the group to elect a
// master before its put fails.
const masterWait = 60 * time.Second

// master is the node the cluster last saw as master ("" before Up).
func (c *cluster) master() string {
	if m, ok := c.masterName.Load().(string); ok {
		return m
	}
	return ""
}

func (c *cluster) setMaster(name string) {
	if name != "" && c.byName[name] != nil {
		c.masterName.Store(name)
	}
}

// Nodes implements engine.Cluster. The master takes the writes; every
// other node receives from it.
func (c *cluster) Nodes() []engine.Node {
	m := c.master()
	out := make([]engine.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		en := engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, Addr: n.client,
			DSN: "bdbje://" + n.client.String(), Version: c.prog.version, Writable: n.Name == m}
		if n.Name != m && m != "" {
			en.Upstreams = []string{m}
		}
		out = append(out, en)
	}
	return out
}

// running are the nodes whose JVM runs.
func (c *cluster) running() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.pid() != 0 {
			out = append(out, n)
		}
	}
	return out
}

// findMaster asks the running nodes, from their own sites, who is master
// and returns it once one says it is.
func (c *cluster) findMaster(ctx context.Context, wait time.Duration) (*node, error) {
	deadline := time.Now().Add(wait)
	var last error
	for {
		for _, n := range c.running() {
			st, err := n.stateFromSite(ctx, 2*time.Second)
			if err != nil {
				last = fmt.Errorf("node %s: %w", n.Name, err)
				continue
			}
			if st.State == stateMaster {
				c.setMaster(n.Name)
				return n, nil
			}
		}
		if last == nil {
			last = errors.New("no node is master")
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no master within %s: %w", wait, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitFlowing implements engine.Cluster: a stamp put at the master must
// become visible at every running node.
func (c *cluster) WaitFlowing(ctx context.Context) error {
	m, err := c.findMaster(ctx, masterWait)
	if err != nil {
		return err
	}
	mc, err := m.dialFromSite(ctx)
	if err != nil {
		return fmt.Errorf("node %s: %w", m.Name, err)
	}
	defer mc.Close()
	seq := time.Now().UnixNano()
	if _, _, err := mc.insert(ctx, insertReq{writer: flowWriter, seq: seq}, nil); err != nil {
		return fmt.Errorf("node %s: %w", m.Name, err)
	}
	return enginekit.Each(c.running(), func(n *node) error {
		_, err := enginekit.Poll{Interval: 20 * time.Millisecond, Stall: 2 * time.Minute}.Until(ctx, func(ctx context.Context) (bool, string, error) {
			got, err := n.stamp(ctx, flowWriter)
			if err != nil {
				return false, err.Error(), nil
			}
			return got >= seq, fmt.Sprintf("stamp %d of %d", got, seq), nil
		})
		if err != nil {
			return fmt.Errorf("node %s: the master's change did not arrive: %w", n.Name, err)
		}
		return nil
	})
}

// stamp reads one writer's stamp at the node, from its site.
func (n *node) stamp(ctx context.Context, writer int) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cn, err := n.dialFromSite(ctx)
	if err != nil {
		return 0, err
	}
	defer cn.Close()
	var got int64 = -1
	err = cn.lagEach(ctx, func(w int, s int64) {
		if w == writer {
			got = s
		}
	})
	return got, err
}

// ReplicationState implements engine.Cluster: the master's view of each
// replica (its feeders' statistics), in VLSNs.
func (c *cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	m := c.byName[c.master()]
	if m == nil || m.pid() == 0 {
		return nil, nil
	}
	st, err := m.stateFromSite(ctx, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", m.Name, err)
	}
	if st.State != stateMaster {
		c.setMaster(st.Master)
		return nil, nil
	}
	var out []engine.ReplicaState
	for _, name := range slices.Sorted(maps.Keys(st.Replicas)) {
		r := st.Replicas[name]
		out = append(out, engine.ReplicaState{Node: name, From: m.Name, Kind: "je-ha", State: "streaming",
			Backlog: r.LagVLSN, BacklogUnit: UnitVLSNs, ReplayLagMs: -1,
			Positions: []engine.Position{{Name: "master_vlsn", Value: strconv.FormatInt(st.VLSN, 10)}, {Name: "replica_vlsn", Value: strconv.FormatInt(r.VLSN, 10)}}})
	}
	return out, nil
}

// UnitVLSNs counts JE's log entries that replicate (one per change or
// commit): a replica's backlog.
const UnitVLSNs = "VLSNs"

// ResetLag implements engine.LagStamps.
func (c *cluster) ResetLag(ctx context.Context, writers int) error {
	m, err := c.findMaster(ctx, masterWait)
	if err != nil {
		return err
	}
	mc, err := m.dialFromSite(ctx)
	if err != nil {
		return err
	}
	defer mc.Close()
	return mc.resetLag(ctx, writers)
}

// LagReader implements engine.LagReaders: stamps read at the node through
// a connection from its own site.
func (c *cluster) LagReader(ctx context.Context, node string) (engine.LagReader, error) {
	n := c.byName[node]
	if n == nil {
		return nil, enginekit.NoSuchNode(node, c.Nodes())
	}
	cn, err := n.dialFromSite(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	return &lagReader{n: n, c: cn}, nil
}

type lagReader struct {
	n *node
	c *conn // nil after a failure: the next read connects again
}

func (r *lagReader) Positions(ctx context.Context, dst []int64) error {
	if r.c == nil {
		c, err := r.n.dialFromSite(ctx)
		if err != nil {
			return err
		}
		r.c = c
	}
	err := r.c.lagEach(ctx, func(w int, s int64) {
		if w >= 0 && w < len(dst) {
			dst[w] = s
		}
	})
	var e *Error
	if err != nil && !errors.As(err, &e) {
		r.c.Close()
		r.c = nil
	}
	return err
}

func (r *lagReader) Close() error {
	if r.c != nil {
		return r.c.Close()
	}
	return nil
}

// Classify implements engine.ErrorClassifier.
func (c *cluster) Classify(err error) engine.ErrorClass {
	var e *Error
	if !errors.As(err, &e) {
		return engine.ErrorClass{}
	}
	cl := engine.ErrorClass{Code: e.Code}
	switch e.Code {
	case codeReplica, codeUnknownMaster:
		cl.Unavailable = true
	case codeLockTimeout:
		cl.Retry, cl.Conflict = true, true
	}
	return cl
}

// Checksums implements engine.Checksummer: records and hashes of kv at
// every running node; every node holds the whole environment.
func (c *cluster) Checksums(ctx context.Context, tables ...string) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for _, n := range c.running() {
		cn, err := n.dialFromSite(ctx)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		records, sum, err := cn.checksum(ctx)
		cn.Close()
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out[n.Name] = map[string]int64{"kv": sum ^ records*-7046029254386353131}
	}
	return out, nil
}

// Loader implements engine.BulkLoader: records in batches, one
// transaction each, at the master.
func (c *cluster) Loader(ctx context.Context, node, fromSite string) (engine.Loader, error) {
	site := c.lab.Site(fromSite)
	if site == nil {
		return nil, fmt.Errorf("no site %s", fromSite)
	}
	k, err := c.KVClient(ctx, site.DialContext)
	if err != nil {
		return nil, err
	}
	return &loader{k: k.(*kvClient)}, nil
}

// loadBatch is how many records one load transaction puts.
const loadBatch = 1000

type loader struct{ k *kvClient }

func (l *loader) Copy(ctx context.Context, table string, columns []string, rows engine.RowSource) (int64, error) {
	if table != "kv" || len(columns) != 2 {
		return 0, fmt.Errorf("engine bdbje stores key-value records: cannot load table %s (%v)", table, columns)
	}
	var n int64
	batch := make([]engine.KVRecord, 0, loadBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := l.k.Put(ctx, batch, engine.KVStamp{}); err != nil {
			return err
		}
		n += int64(len(batch))
		batch = batch[:0]
		return nil
	}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return n, err
		}
		key, ok1 := v[0].([]byte)
		val, ok2 := v[1].([]byte)
		if !ok1 || !ok2 {
			return n, fmt.Errorf("engine bdbje loads byte keys and values, got %T and %T", v[0], v[1])
		}
		batch = append(batch, engine.KVRecord{Key: append([]byte(nil), key...), Value: append([]byte(nil), val...)}) // rows may reuse them
		if len(batch) == loadBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, flush()
}

// Exec implements engine.Loader: there is no SQL to run.
func (l *loader) Exec(ctx context.Context, sql string) error {
	return fmt.Errorf("engine bdbje runs no SQL (%q)", sql)
}

func (l *loader) Close() error { return l.k.Close() }

// Gauges implements engine.Gauger: each running JVM's heap and garbage
// collection, read through its node program.
func (c *cluster) Gauges(ctx context.Context) ([]engine.Gauge, error) {
	var out []engine.Gauge
	for _, n := range c.running() {
		st, err := n.stateFromSite(ctx, 2*time.Second)
		if err != nil {
			continue // killed or paused meanwhile: no figure this time
		}
		out = append(out,
			engine.Gauge{Node: n.Name, Name: "heap_used_bytes", Value: float64(st.HeapUsedBytes)},
			engine.Gauge{Node: n.Name, Name: "heap_max_bytes", Value: float64(st.HeapMaxBytes)},
			engine.Gauge{Node: n.Name, Name: "gc_count", Value: float64(st.GCCount), Counter: true},
			engine.Gauge{Node: n.Name, Name: "gc_time_ms", Value: float64(st.GCTimeMs), Counter: true},
			engine.Gauge{Node: n.Name, Name: "vlsn", Value: float64(st.VLSN)})
	}
	return out, nil
}

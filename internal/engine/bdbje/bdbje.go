// Package bdbje runs Berkeley DB Java Edition High Availability in a lab's
// sites: the Berkeley DB study's own system (seed 003). Each node is one
// JVM running replab's node program (java/ReplabNode.java, built at first
// use against JE from Maven Central), which opens a ReplicatedEnvironment
// on the node's storage and serves replab's small protocol
// (docs/bdbje.md) on a second port: puts with the lag probe's stamp and
// the acknowledged-commits journal's key, reads under a replica consistency
// policy, the stamps and journal keys visible, the node's state, a
// checksum. The group elects its master; clients follow it.
package bdbje

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
	"replab/internal/units"
)

// DefaultPort is JE's replication port of a site's first node; the
// node's client port is its replication port + clientPortOffset.
const (
	DefaultPort      = 5001
	clientPortOffset = 1000
)

// Node roles (JE node types).
const (
	RoleElectable = "electable"
	RoleSecondary = "secondary"
)

// Sync policies and ack policies, as specs write them, with JE's names.
var (
	syncPolicies = map[string]string{"sync": "SYNC", "write_no_sync": "WRITE_NO_SYNC", "no_sync": "NO_SYNC"}
	ackPolicies  = map[string]string{"all": "ALL", "majority": "SIMPLE_MAJORITY", "none": "NONE"}
)

// Defaults: JE's own durability default (SYNC, NO_SYNC, SIMPLE_MAJORITY)
// and ack timeout, a heap that fits many JVMs on a small machine.
const (
	DefaultLocalSync   = "sync"
	DefaultReplicaSync = "no_sync"
	DefaultAck         = "majority"
	DefaultAckTimeout  = 5 * time.Second
	DefaultHeap        = 256 << 20
)

// JIT choices. The JVM's default compiles hot code twice, quickly (C1)
// then well (C2); C2's compilations of JE took half a core per JVM for
// more than a minute here, so a short measurement of several JVMs on a
// small machine would measure the compiler. "quick" stops at C1: steady
// within seconds, somewhat slower code.
const (
	JITQuick = "quick"
	JITFull  = "full"
)

// Engine is Berkeley DB Java Edition HA.
type Engine struct{}

// Kind implements engine.Engine.
func (Engine) Kind() string { return "bdbje" }

// Dialect implements engine.Dialecter: records, not SQL.
func (Engine) Dialect() engine.Dialect { return engine.KV }

// plan is what the spec asks of the engine.
type plan struct {
	localSync, replicaSync, ack string // JE's names
	ackTimeout                  time.Duration
	cacheBytes, heapBytes       int64
	jit                         string // JITQuick or JITFull
}

// durability is the node program's --durability.
func (p *plan) durability() string {
	return p.localSync + "," + p.replicaSync + "," + p.ack
}

func makePlan(s *spec.Spec) (*plan, error) {
	errs := s.NewErrors()
	if r := s.Scheme.Replication; r != "" && r != "ha" {
		errs.Add("scheme.replication", `unknown replication %q for engine bdbje: JE replicates its own way, replication = "ha" (or leave it out)`, r)
	}
	o := s.SchemeOptions("engine bdbje")
	p := &plan{
		localSync:   syncPolicies[o.String("local_sync", DefaultLocalSync, slices.Sorted(maps.Keys(syncPolicies))...)],
		replicaSync: syncPolicies[o.String("replica_sync", DefaultReplicaSync, slices.Sorted(maps.Keys(syncPolicies))...)],
		ack:         ackPolicies[o.String("ack", DefaultAck, slices.Sorted(maps.Keys(ackPolicies))...)],
		ackTimeout:  o.Duration("ack_timeout", DefaultAckTimeout, 10*time.Millisecond, time.Hour),
		cacheBytes:  o.Size("cache_size", 0, 1<<20, 64<<30),
		heapBytes:   o.Size("heap", DefaultHeap, 64<<20, 64<<30),
		jit:         o.String("jit", JITQuick, JITQuick, JITFull),
	}
	errs.Join(o.Err())
	if p.cacheBytes >= p.heapBytes {
		errs.Add("scheme.cache_size", "cache_size (%s) must be smaller than the heap (%s): JE's cache lives in the JVM's heap", units.Bytes(float64(p.cacheBytes)), units.Bytes(float64(p.heapBytes)))
	}
	electable := 0
	if len(s.Nodes) == 0 {
		errs.Add("engine", `engine bdbje needs a [node.NAME] with site = "…" and role = "electable"`)
	}
	for _, n := range s.Nodes {
		f := "node." + n.Name
		switch n.Role {
		case RoleElectable:
			electable++
		case RoleSecondary:
		default:
			errs.Add(f+".role", `unknown role %q for engine bdbje: "electable" (votes, may become master) or "secondary" (a read-only replica that never votes)`, n.Role)
		}
		if n.From != "" {
			errs.Add(f+".from", "JE nodes replicate from the master the group elects: remove from")
		}
		if len(n.Tables) > 0 {
			errs.Add(f+".table", "engine bdbje replicates whole environments: no table filters")
		}
		if n.ApplyDelay > 0 {
			errs.Add(f+".apply_delay", "engine bdbje has no apply delay")
		}
		if n.Port > 65535-clientPortOffset {
			errs.Add(f+".port", "port %d leaves no room for the client port (port + %d)", n.Port, clientPortOffset)
		}
		for k := range n.Settings {
			if !strings.HasPrefix(k, "je.") {
				errs.Add(f+".settings", "setting %q is not a JE parameter: they are named je.… (e.g. je.log.fileMax, je.rep.electionsPrimaryRetries)", k)
			}
		}
	}
	if len(s.Nodes) > 0 && electable == 0 {
		errs.Add("engine", `engine bdbje needs at least one node with role = "electable": only electable nodes can be master`)
	}
	if len(s.Nodes) > 0 && s.Nodes[0].Role != RoleElectable {
		errs.Add("node."+s.Nodes[0].Name+".role", "the first node founds the group and becomes its first master: make it electable, or list an electable node first")
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Validate implements engine.Engine.
func (Engine) Validate(s *spec.Spec) error {
	_, err := makePlan(s)
	return err
}

// The capabilities a cluster has.
var (
	_ engine.NodeControl     = (*cluster)(nil)
	_ engine.Pauser          = (*cluster)(nil)
	_ engine.KVStore         = (*cluster)(nil)
	_ engine.KVAcks          = (*cluster)(nil)
	_ engine.LagStamps       = (*cluster)(nil)
	_ engine.BulkLoader      = (*cluster)(nil)
	_ engine.Checksummer     = (*cluster)(nil)
	_ engine.ErrorClassifier = (*cluster)(nil)
	_ engine.Gauger          = (*cluster)(nil)
)

type cluster struct {
	enginekit.ProcNodes // node control and pausing
	lab                 *lab.Lab
	plan                *plan
	prog                *program
	uid, gid            int
	log                 io.Writer
	nodes               []*node
	byName              map[string]*node
	once                sync.Once
	masterName          atomic.Value  // string: the node last seen as master
	closed              chan struct{} // closed by Close
}

// Up implements engine.Engine: the node program is built if needed, the
// first node founds the group and becomes master, then the others join
// it; Up returns once every node has joined and replication flows.
func (Engine) Up(ctx context.Context, l *lab.Lab, log io.Writer) (_ engine.Cluster, err error) {
	p, err := makePlan(l.Spec)
	if err != nil {
		return nil, err
	}
	prog, err := buildProgram(ctx, log)
	if err != nil {
		return nil, err
	}
	uid, gid, err := enginekit.ServerCredentials(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := enginekit.NodeAddresses(l, DefaultPort)
	if err != nil {
		return nil, err
	}
	c := &cluster{lab: l, plan: p, prog: prog, uid: uid, gid: gid, log: enginekit.NewLockedWriter(log), byName: map[string]*node{}, closed: make(chan struct{})}
	c.ProcNodes = c.procNodes()
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for _, sn := range l.Spec.Nodes {
		data, err := l.NodeDataDir(sn.Name) // on its storage
		if err != nil {
			return nil, err
		}
		a := addrs[sn.Name]
		n := &node{Node: sn, c: c, site: l.Site(sn.Site), addr: a,
			client: netip.AddrPortFrom(a.Addr(), a.Port()+clientPortOffset), base: filepath.Join(data, "bdbje-"+sn.Name)}
		c.nodes = append(c.nodes, n)
		c.byName[sn.Name] = n
	}
	start := time.Now()
	first := c.nodes[0]
	if err := first.create(ctx); err != nil {
		return nil, err
	}
	c.setMaster(first.Name)
	if err := enginekit.Each(c.nodes[1:], func(n *node) error { return n.create(ctx) }); err != nil {
		return nil, err
	}
	if err := c.WaitFlowing(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.log, "bdbje: group of %d node(s), master %s, durability %s, ack timeout %s (%.1f s)\n",
		len(c.nodes), first.Name, p.durability(), p.ackTimeout, time.Since(start).Seconds())
	return c, nil
}

// helpers are the addresses a node asks to join the group: the founder's,
// and for the founder itself its own.
func (c *cluster) helpers() string {
	var hs []string
	for _, n := range c.nodes {
		if n.Role == RoleElectable {
			hs = append(hs, n.addr.String())
		}
	}
	return strings.Join(hs, ",")
}

// Close implements engine.Cluster.
func (c *cluster) Close() error {
	c.once.Do(func() {
		close(c.closed)
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); n.stop(20 * time.Second) }()
		}
		wg.Wait()
	})
	return nil
}

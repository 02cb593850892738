// Package mariadb runs MariaDB nodes in a lab's sites and sets up its
// replication schemes: binlog + GTID replicas (asynchronous, cascading),
// semi-synchronous replication with its fallbacks to asynchronous tracked,
// multi-master rings of asynchronous masters, and Galera (synchronous
// multi-master). docs/mariadb.md maps scheme names and options to MariaDB
// settings.
package mariadb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is MariaDB.
type Engine struct{}

// Kind implements engine.Engine.
func (Engine) Kind() string { return "mariadb" }

// Dialect implements engine.Dialecter.
func (Engine) Dialect() engine.Dialect { return engine.MySQL }

// galeraSSTBytes is what a joiner's rsync SST of a fresh cluster puts on
// its link: 88.0 MB measured (TestGaleraMinorityRefusesAndRejoins), 64 MB
// of it the redo log (innodb_log_file_size).
const galeraSSTBytes = 88_000_000

// InitialCopyBytes implements engine.CopySizer: a Galera joiner copies the
// first node's data directory (SST) besides the workload's data; a binlog
// replica or a master of a ring copies nothing (it replays the binlog from
// its start, which holds only the workload's changes).
func (Engine) InitialCopyBytes(s *spec.Spec, node string) int64 {
	if s.Scheme.Replication != Galera {
		return 0
	}
	for _, n := range s.Nodes {
		if n.Role == "master" {
			if n.Name == node {
				return 0 // the first master bootstraps the cluster
			}
			return galeraSSTBytes
		}
	}
	return 0
}

var _ engine.CopySizer = Engine{}

// Validate implements engine.Engine.
func (Engine) Validate(s *spec.Spec) error {
	_, err := makePlan(s)
	return err
}

// The capabilities a cluster has; lag stamps are the SQL implementation
// (enginekit.StampsOf) over replab_lag, read by the cluster's own LagReader.
var (
	_ engine.SQL             = (*cluster)(nil)
	_ engine.BulkLoader      = (*cluster)(nil)
	_ engine.LagReaders      = (*cluster)(nil)
	_ engine.NodeControl     = (*cluster)(nil)
	_ engine.Pauser          = (*cluster)(nil)
	_ engine.ErrorClassifier = (*cluster)(nil)
	_ engine.Checksummer     = (*cluster)(nil)
)

// cluster is a running set of MariaDB nodes.
type cluster struct {
	enginekit.ProcNodes // node control and pausing
	lab                 *lab.Lab
	plan                *plan
	version             string
	password            string // the replab SQL user's, the same at every node
	uid, gid            int
	log                 io.Writer
	nodes               []*node // spec order
	byName              map[string]*node

	semi      *semiTracker // semisync only
	semiArmed atomic.Bool  // the primary's semi-sync is on (and in its option file)
	stopBg    context.CancelFunc
	bg        sync.WaitGroup
	closeOnce sync.Once
	markerMu  sync.Mutex
	markerSeq int64
	// tracked: the pools' connections by server address and connection id
	// (positions.go).
	tracked sync.Map
}

// Up implements engine.Engine: every node is installed and started at
// once, then the replicas (and the masters of a ring) are pointed at their
// upstreams by GTID, and Up waits until a marker from every source has
// reached every node.
func (Engine) Up(ctx context.Context, l *lab.Lab, log io.Writer) (_ engine.Cluster, err error) {
	p, err := makePlan(l.Spec)
	if err != nil {
		return nil, err
	}
	c, err := newCluster(ctx, l, p, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.layout(); err != nil {
		return nil, err
	}
	if p.replication == Galera {
		err = c.upGalera(ctx)
	} else {
		err = enginekit.Each(c.nodes, func(n *node) error { return c.createNode(ctx, n) })
	}
	if err != nil {
		return nil, err
	}
	first := c.byName[p.sources[0]]
	if err := first.exec(ctx, markerDDL); err != nil {
		return nil, err
	}
	if err := enginekit.Each(c.nodes, func(n *node) error { return c.follow(ctx, n) }); err != nil {
		return nil, err
	}
	// Markers at the other sources need the table: wait until it arrived.
	if err := enginekit.Each(c.nodes, func(n *node) error { return c.waitTable(ctx, n, "replab_marker") }); err != nil {
		return nil, err
	}
	if p.replication == Semisync {
		if err := c.armSemisync(ctx, first); err != nil {
			return nil, err
		}
		bgctx, cancel := context.WithCancel(context.Background())
		c.stopBg = cancel
		c.semi = newSemiTracker(first)
		c.bg.Add(1)
		go func() { defer c.bg.Done(); c.semi.run(bgctx) }()
	}
	if err := c.WaitFlowing(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// newCluster is a cluster of no nodes yet: the installed version, the
// servers' OS user and a fresh password for replab's SQL user.
func newCluster(ctx context.Context, l *lab.Lab, p *plan, log io.Writer) (*cluster, error) {
	version, err := findVersion(ctx)
	if err != nil {
		return nil, err
	}
	uid, gid, err := enginekit.ServerCredentials(ctx)
	if err != nil {
		return nil, err
	}
	pw := make([]byte, 12)
	if _, err := rand.Read(pw); err != nil {
		return nil, err
	}
	c := &cluster{lab: l, plan: p, version: version, password: hex.EncodeToString(pw), uid: uid, gid: gid,
		log: enginekit.NewLockedWriter(log), byName: map[string]*node{}}
	c.ProcNodes = c.procNodes()
	return c, nil
}

// armSemisync turns semi-synchronous replication on at the primary once
// its replicas follow it, and reconnects the direct replicas: a replica
// asks for semi-sync when it connects, and only gets it if the primary has
// it on then. It returns when every direct replica is a semi-sync client.
func (c *cluster) armSemisync(ctx context.Context, primary *node) error {
	c.semiArmed.Store(true)
	if err := primary.writeFiles(); err != nil { // a restart keeps it on
		return fmt.Errorf("node %s: %w", primary.Name, err)
	}
	if err := primary.exec(ctx, "SET GLOBAL rpl_semi_sync_master_enabled = ON"); err != nil {
		return err
	}
	var direct []*node
	for _, n := range c.nodes {
		if n.From == primary.Name {
			direct = append(direct, n)
		}
	}
	for _, n := range direct {
		if err := n.exec(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			return err
		}
		if err := n.exec(ctx, "START SLAVE IO_THREAD"); err != nil {
			return err
		}
	}
	_, err := enginekit.Poll{Stall: c.flowTimeout()}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		db, err := primary.db()
		if err != nil {
			return false, "", err
		}
		st, err := globalStatus(ctx, db, "Rpl_semi_sync_master_clients")
		if err != nil {
			return false, "", err
		}
		k, _ := strconv.Atoi(st["Rpl_semi_sync_master_clients"])
		return k >= len(direct), fmt.Sprintf("%d of %d semi-sync replicas connected", k, len(direct)), nil
	})
	if err != nil {
		return fmt.Errorf("node %s: semi-sync replicas: %w", primary.Name, err)
	}
	fmt.Fprintf(c.log, "node %s: semi-sync on (%s, timeout %s), %d replicas acknowledge\n", primary.Name, c.plan.waitPoint, c.plan.timeout, len(direct))
	return nil
}

// markerDDL is the table WaitFlowing writes markers to.
const markerDDL = `CREATE TABLE IF NOT EXISTS replab_marker (source VARCHAR(64) PRIMARY KEY, seq BIGINT NOT NULL,
	at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB`

// layout assigns each node its address, port and files: on its storage
// (lab.NodeDataDir). With only, just those nodes of the spec.
func (c *cluster) layout(only ...string) error {
	addrs, err := enginekit.NodeAddresses(c.lab, DefaultPort)
	if err != nil {
		return err
	}
	sockRoot, err := c.lab.SocketDir()
	if err != nil {
		return err
	}
	for i, sn := range c.lab.Spec.Nodes {
		if len(only) > 0 && !slices.Contains(only, sn.Name) {
			continue
		}
		site := c.lab.Site(sn.Site)
		ap := addrs[sn.Name]
		data, err := c.lab.NodeDataDir(sn.Name)
		if err != nil {
			return err
		}
		base := filepath.Join(data, "mariadb-"+sn.Name)
		n := &node{
			Node:     sn,
			c:        c,
			index:    i,
			site:     site,
			addr:     ap,
			dataDir:  base,
			tmpDir:   base + ".tmp",
			sockDir:  filepath.Join(sockRoot, sn.Name),
			cnfPath:  base + ".cnf",
			cliPath:  base + "-client.cnf",
			initPath: base + "-init.sql",
			logPath:  base + ".log",
		}
		c.nodes = append(c.nodes, n)
		c.byName[sn.Name] = n
	}
	return nil
}

// asServerUser makes cmd run as the servers' OS user.
func (c *cluster) asServerUser(cmd *exec.Cmd) { enginekit.AsUser(cmd, c.uid, c.gid) }

// createNode installs, starts and empties the binlog of one node.
func (c *cluster) createNode(ctx context.Context, n *node) error {
	start := time.Now()
	if err := n.installDB(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	// Whatever the install wrote is no change a replica should fetch:
	// every node starts with empty GTID positions.
	if err := n.exec(ctx, "RESET MASTER"); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: %s MariaDB %s started in %s (%.2f s)\n", n.Name, n.Role, c.version, n.Site, time.Since(start).Seconds())
	return nil
}

// upstream is the node n replicates from: its from, or for a master of a
// ring the master before it.
func (c *cluster) upstream(n *node) *node {
	if n.From != "" {
		return c.byName[n.From]
	}
	if c.plan.replication == Multimaster {
		if i := indexOf(c.plan.sources, n.Name); i >= 0 {
			k := len(c.plan.sources)
			return c.byName[c.plan.sources[(i+k-1)%k]]
		}
	}
	return nil
}

// follow points n at its upstream, by GTID, and starts its replica
// threads. Every node's binlog holds every change since it started, so a
// replica needs no copy: it fetches from the upstream's first GTID.
func (c *cluster) follow(ctx context.Context, n *node) error {
	up := c.upstream(n)
	if up == nil {
		return nil
	}
	q := fmt.Sprintf("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%s, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		sqlString(up.addr.Addr().String()), up.addr.Port(), sqlString(User), sqlString(c.password))
	if err := n.exec(ctx, q); err != nil {
		return err
	}
	if err := n.exec(ctx, "START SLAVE"); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: replicating from %s (%s -> %s), GTID slave_pos\n", n.Name, up.Name, up.Site, n.Site)
	return nil
}

// waitTable polls n until table exists there.
func (c *cluster) waitTable(ctx context.Context, n *node, table string) error {
	_, err := enginekit.Poll{Stall: c.flowTimeout()}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		var k int
		err := n.query1(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", []any{Database, table}, &k)
		return err == nil && k > 0, "not there", err
	})
	if err != nil {
		return fmt.Errorf("node %s: table %s did not arrive: %w", n.Name, table, err)
	}
	return nil
}

// Nodes implements engine.Cluster: the primary (or every master) takes
// writes; a replica receives from its upstream, a master from every other
// master (around the ring).
func (c *cluster) Nodes() []engine.Node {
	out := make([]engine.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		en := engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, From: n.From, Addr: n.addr, DSN: n.dsn(), Version: c.version,
			Writable: indexOf(c.plan.sources, n.Name) >= 0}
		switch {
		case n.From != "":
			en.Upstreams = []string{n.From}
		case c.plan.replication == Multimaster || c.plan.replication == Galera:
			for _, m := range c.plan.sources {
				if m != n.Name {
					en.Upstreams = append(en.Upstreams, m)
				}
			}
		}
		out = append(out, en)
	}
	return out
}

// WaitFlowing implements engine.Cluster: a marker written at every source
// must become visible at every other node (all of them receive every
// source's changes, directly or through a chain or a ring).
func (c *cluster) WaitFlowing(ctx context.Context) error {
	c.markerMu.Lock()
	c.markerSeq++
	seq := c.markerSeq
	c.markerMu.Unlock()
	for _, src := range c.plan.sources {
		if err := c.writeMarker(ctx, c.byName[src], seq); err != nil {
			return err
		}
	}
	type trip struct {
		n   *node
		src string
	}
	var trips []trip
	for _, n := range c.nodes {
		for _, src := range c.plan.sources {
			if src != n.Name {
				trips = append(trips, trip{n, src})
			}
		}
	}
	return enginekit.Each(trips, func(t trip) error { return c.waitMarker(ctx, t.n, t.src, seq) })
}

// writeMarker upserts the source's marker, bounded: a semi-synchronous
// commit without acknowledgement waits for its timeout.
func (c *cluster) writeMarker(ctx context.Context, n *node, seq int64) error {
	wctx, cancel := context.WithTimeout(ctx, c.flowTimeout())
	defer cancel()
	err := n.exec(wctx, `INSERT INTO replab_marker (source, seq) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE seq = VALUES(seq), at = CURRENT_TIMESTAMP(6)`, n.Name, seq)
	if err != nil && wctx.Err() != nil {
		return fmt.Errorf("node %s: a marker commit did not return in time: %w", n.Name, err)
	}
	return err
}

// waitMarker polls n until src's marker reaches seq. A replica draining a
// backlog (a saturated link's, after a measurement) shows an older marker
// for as long as the backlog lasts; the GTIDs it has applied move, and
// count as progress. A replica whose SQL thread stopped on an error (two
// masters that inserted the same key) will not move again: that ends the
// wait at once, with the error.
func (c *cluster) waitMarker(ctx context.Context, n *node, src string, seq int64) error {
	var stopped *replicationStopped
	poll := enginekit.Poll{Stall: c.flowTimeout(), Permanent: func(err error) bool { return errors.As(err, &stopped) }}
	_, err := poll.Until(ctx, func(ctx context.Context) (bool, string, error) {
		var got int64
		var applied string
		err := n.query1(ctx, `SELECT coalesce(max(seq), 0), @@gtid_current_pos FROM replab_marker WHERE source = ?`, []any{src}, &got, &applied)
		if err == nil && got < seq && c.upstream(n) != nil {
			if st, serr := slaveStatus(ctx, n); serr == nil && st["Slave_SQL_Running"] == "No" && st["Last_SQL_Error"] != "" {
				err = &replicationStopped{node: n.Name, err: st["Last_SQL_Error"]}
			}
		}
		return err == nil && got >= seq, fmt.Sprintf("still at %d, applied %s", got, applied), err
	})
	if err != nil {
		return fmt.Errorf("node %s: marker %d from %s not visible: replication is not flowing: %w", n.Name, seq, src, err)
	}
	return nil
}

// replicationStopped: a replica's SQL thread stopped on an error, which
// MariaDB does not retry (slave_exec_mode = STRICT).
type replicationStopped struct{ node, err string }

func (e *replicationStopped) Error() string {
	return fmt.Sprintf("replication stopped at %s: %s (the SQL thread does not restart by itself)", e.node, e.err)
}

// flowTimeout bounds a marker's trip: generous for satellite links, and
// longer than a semi-synchronous commit waits for its acknowledgement.
func (c *cluster) flowTimeout() time.Duration {
	return 60*time.Second + 20*c.lab.Spec.WorstRoundTrip() + c.plan.timeout
}

// Close implements engine.Cluster: replicas first, then the sources, each
// with a bounded clean shutdown; the node's files stay with the lab's data
// directory, which the lab removes.
func (c *cluster) Close() error {
	c.closeOnce.Do(func() {
		if c.stopBg != nil {
			c.stopBg()
		}
		c.bg.Wait()
		stopAll := func(sources bool) {
			var wg sync.WaitGroup
			for _, n := range c.nodes {
				if (indexOf(c.plan.sources, n.Name) >= 0) == sources {
					wg.Add(1)
					go func() { defer wg.Done(); n.stop(30 * time.Second) }()
				}
			}
			wg.Wait()
		}
		stopAll(false)
		stopAll(true)
		for _, n := range c.nodes {
			_ = os.Remove(n.cliPath) // it holds the password
		}
	})
	return nil
}

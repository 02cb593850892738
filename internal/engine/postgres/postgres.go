// Package postgres runs PostgreSQL nodes in a lab's sites and sets up its
// replication schemes: physical streaming (asynchronous, synchronous with
// FIRST/ANY, cascading, apply delay), logical replication (partial
// replicas with row filters and column lists), periodic snapshot refresh,
// and multi-master with pglogical. docs/postgres.md maps scheme names to
// PostgreSQL settings.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is PostgreSQL.
type Engine struct {
	// Engines finds the engines this one runs servers of (the pipeline
	// scheme's MariaDB sinks, an engine.SinkRunner): the registry's Get.
	Engines engine.Finder
}

// Kind implements engine.Engine.
func (Engine) Kind() string { return "postgres" }

// InitialCopyBytes implements engine.CopySizer: a standby starts from a
// base backup of a fresh cluster, about 32 MB of files that cross the link
// zstd-compressed as about 4–5 MB (bench/results/pgsetup.json; 32 MB
// where the server has no compression); a logical replica or a master
// copies only the workload's data.
func (Engine) InitialCopyBytes(s *spec.Spec, node string) int64 {
	if n := s.Node(node); n != nil && n.Role == "standby" {
		return 5 << 20
	}
	return 0
}

// Dialect implements engine.Dialecter.
func (Engine) Dialect() engine.Dialect { return engine.Postgres }

// Dialect implements engine.SQL.
func (c *cluster) Dialect() engine.Dialect { return engine.Postgres }

// A cluster has every capability replab knows but its own lag stamps: the
// SQL implementation (package lagprobe's replab_lag table) serves it, read
// through the faster LagReader.
var (
	_ engine.SQL             = (*cluster)(nil)
	_ engine.BulkLoader      = (*cluster)(nil)
	_ engine.Pipeliner       = (*cluster)(nil)
	_ engine.LagReaders      = (*cluster)(nil)
	_ engine.NodeControl     = (*cluster)(nil)
	_ engine.Refresher       = (*cluster)(nil)
	_ engine.ErrorClassifier = (*cluster)(nil)
	_ engine.Checksummer     = (*cluster)(nil)
	_ engine.Gauger          = (*cluster)(nil)
)

// Validate implements engine.Engine.
func (Engine) Validate(s *spec.Spec) error {
	_, err := makePlan(s)
	return err
}

// cluster is a running set of PostgreSQL nodes.
type cluster struct {
	lab  *lab.Lab
	plan *plan
	// topo guards what a failover changes while monitors and the runner
	// read it: plan.primaries, the nodes' Role, From and failedOver.
	topo     sync.RWMutex
	inst     *install
	uid, gid int
	log      io.Writer
	nodes    []*node // spec order
	byName   map[string]*node

	bg        sync.WaitGroup // background work (snapshot refresh)
	stopBg    context.CancelFunc
	closeOnce sync.Once
	markerSeq int64
	lg        *logicalState  // logical and snapshot schemes (logical.go)
	pipeline  *pipelineState // the pipeline scheme (pipeline.go)
	// engines finds the sinks' engine (Engine.Engines); sinks are the
	// pipeline's MariaDB sinks (pipesink.go), the nodes in sinkNodes, nil
	// without target = "mariadb".
	engines   engine.Finder
	sinks     engine.Sinks
	sinkNodes map[string]bool
	// store is the HA manager's etcd (etcd.go); watch follows who is
	// primary (watch.go). Both nil without a manager.
	store *store
	watch *watcher
	// monitor is pg_auto_failover's monitor node (pgautofailover.go).
	monitor *pgafMonitor
	// proxies are route = "haproxy"'s, one per client site (haproxy.go).
	proxyMu sync.Mutex
	proxies map[string]*proxy
}

// Up implements engine.Engine.
func (e Engine) Up(ctx context.Context, l *lab.Lab, log io.Writer) (_ engine.Cluster, err error) {
	p, err := makePlan(l.Spec)
	if err != nil {
		return nil, err
	}
	inst, err := findInstall(ctx)
	if err != nil {
		return nil, err
	}
	if p.replication == Multimaster && !inst.hasExtension("pglogical") {
		return nil, fmt.Errorf("multi-master needs pglogical: apt-get install postgresql-%d-pglogical", inst.Major)
	}
	uid, gid, err := enginekit.ServerCredentials(ctx)
	if err != nil {
		return nil, err
	}
	// Nodes start and copy in parallel: one writer for their lines.
	c := &cluster{lab: l, plan: p, inst: inst, uid: uid, gid: gid, log: enginekit.NewLockedWriter(log), byName: map[string]*node{}, engines: e.Engines}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.layout(); err != nil {
		return nil, err
	}
	bgctx, cancel := context.WithCancel(context.Background())
	c.stopBg = cancel
	switch {
	case p.manager != nil && p.manager.kind == ManagerRepmgr:
		err = c.upRepmgr(ctx)
	case p.manager != nil && p.manager.kind == ManagerPgAF:
		err = c.upPgAF(ctx)
	case p.manager != nil:
		err = c.upPatroni(ctx)
	case p.replication == Async || p.replication == Sync:
		err = c.upPhysical(ctx)
	case p.replication == Logical || p.replication == Snapshot:
		err = c.upLogical(ctx, bgctx)
	case p.replication == Multimaster:
		err = c.upMultimaster(ctx)
	case p.replication == Pipeline:
		err = c.upPipeline(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := c.WaitFlowing(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// layout assigns each node its address, port and directories: on its
// storage (lab.NodeDataDir).
func (c *cluster) layout() error {
	addrs, err := enginekit.NodeAddresses(c.lab, DefaultPort)
	if err != nil {
		return err
	}
	sockRoot, err := c.lab.SocketDir()
	if err != nil {
		return err
	}
	for _, sn := range c.lab.Spec.Nodes {
		site := c.lab.Site(sn.Site)
		ap := addrs[sn.Name]
		data, err := c.lab.NodeDataDir(sn.Name)
		if err != nil {
			return err
		}
		n := &node{
			Node:    sn,
			c:       c,
			site:    site,
			addr:    ap,
			dataDir: filepath.Join(data, "pg-"+sn.Name),
			sockDir: filepath.Join(sockRoot, sn.Name),
			logPath: filepath.Join(data, "pg-"+sn.Name+".log"),
		}
		if err := enginekit.MkdirOwned(n.sockDir, c.uid, c.gid); err != nil {
			return err
		}
		_ = os.Chmod(n.sockDir, 0o755) // clients (root, other users) connect through it
		c.nodes = append(c.nodes, n)
		c.byName[sn.Name] = n
	}
	return nil
}

// asServerUser makes cmd run as the servers' OS user.
func (c *cluster) asServerUser(cmd *exec.Cmd) { enginekit.AsUser(cmd, c.uid, c.gid) }

// clusterSettings are the settings every node shares: sized for a small,
// shared machine (2 cores), with replication and durability from the plan.
func (c *cluster) clusterSettings() map[string]string {
	onoff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	s := map[string]string{
		"shared_buffers":  "64MB",
		"max_connections": "200",
		"max_wal_size":    "512MB",
		// Standbys copied at the same time each trigger a checkpoint; kept
		// WAL stops one's checkpoint from removing a segment another's
		// stream has not requested yet.
		"wal_keep_size":                     "256MB",
		"min_wal_size":                      "80MB",
		"checkpoint_timeout":                "5min",
		"wal_level":                         "logical",
		"max_wal_senders":                   "20",
		"max_replication_slots":             "20",
		"max_worker_processes":              "24",
		"max_logical_replication_workers":   "12",
		"max_sync_workers_per_subscription": "2",
		"hot_standby":                       "on",
		"hot_standby_feedback":              "on",
		"wal_receiver_status_interval":      "1s",
		"track_commit_timestamp":            "on",
		"logging_collector":                 "off",
		"log_line_prefix":                   "%m [%p] %q%u@%d ",
		"log_min_messages":                  "warning",
		"synchronous_commit":                c.plan.commit,
		"fsync":                             onoff(c.plan.fsync),
		"full_page_writes":                  onoff(c.plan.fullPage),
		"wal_compression":                   onoff(c.plan.walCompress),
		"dynamic_shared_memory_type":        "posix",
	}
	if c.plan.replication == Multimaster {
		s["shared_preload_libraries"] = "pglogical"
		s["pglogical.conflict_resolution"] = c.plan.conflict
		// Each conflict resolved is logged, and counted there
		// (ReplicationConflicts): above log_min_messages.
		s["pglogical.conflict_log_level"] = "warning"
	}
	return s
}

// createPrimary initialises, configures and starts a node that does not
// replicate from another (a primary or a master), and creates the replab
// database.
func (c *cluster) createPrimary(ctx context.Context, n *node) error {
	start := time.Now()
	if err := n.initdb(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.writeConfig(nil); err != nil {
		return fmt.Errorf("node %s: configure: %w", n.Name, err)
	}
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.exec(ctx, "postgres", "CREATE DATABASE "+Database); err != nil {
		return err
	}
	if err := n.exec(ctx, "", markerDDL); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: %s %s started in %s (%.2f s)\n", n.Name, n.Role, c.inst.Version, n.Site, time.Since(start).Seconds())
	return nil
}

// markerDDL is the table WaitFlowing writes markers to.
const markerDDL = `CREATE TABLE IF NOT EXISTS replab_marker (source text PRIMARY KEY, seq bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`

// Nodes implements engine.Cluster: the primary (or every master) takes
// writes; a standby or replica receives from its upstream, a master from
// every other master.
func (c *cluster) Nodes() []engine.Node {
	c.topo.RLock()
	defer c.topo.RUnlock()
	out := make([]engine.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		en := engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, From: n.From, Addr: n.addr, DSN: n.dsn(), Version: c.inst.Version,
			Writable: slices.Contains(c.plan.primaries, n.Name)}
		if c.isSink(n.Name) {
			en.DSN, en.Version = c.sinks.DSN(n.Name), "MariaDB "+c.sinks.Version()
		}
		switch {
		case n.From != "":
			en.Upstreams = []string{n.From}
		case c.plan.replication == Multimaster:
			for _, m := range c.plan.primaries {
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
// (the primary, or every master) must become visible at every node that
// receives its changes.
func (c *cluster) WaitFlowing(ctx context.Context) error {
	c.markerSeq++
	seq := c.markerSeq
	if c.watch != nil {
		// An election may be under way: wait for its primary.
		if _, err := c.waitPrimary(ctx); err != nil {
			return err
		}
	}
	c.topo.RLock()
	primaries := slices.Clone(c.plan.primaries)
	var live []*node
	for _, n := range c.nodes {
		// Under a manager, a node whose server is down (its manager left it
		// so: a rewind that failed) receives nothing: not waited for.
		if !n.failedOver && (n.ha == nil || n.ha.proc.PID() != 0 && n.managedPostmasterPID() != 0) {
			live = append(live, n)
		}
	}
	c.topo.RUnlock()
	for _, src := range primaries {
		n := c.byName[src]
		if err := c.writeMarker(ctx, n, seq); err != nil {
			return err
		}
	}
	if c.plan.replication == Snapshot && len(c.replicas()) > 0 {
		// Snapshot replicas see the marker at their next refresh: do it now.
		if err := c.Refresh(ctx); err != nil {
			return err
		}
	}
	type trip struct {
		n   *node
		src string
	}
	var trips []trip
	for _, n := range live {
		for _, src := range primaries {
			if src != n.Name {
				trips = append(trips, trip{n, src})
			}
		}
	}
	if err := enginekit.Each(trips, func(t trip) error { return c.waitMarker(ctx, t.n, t.src, seq) }); err != nil {
		return err
	}
	return c.pipelineWaitApplied(ctx)
}

// writeMarker upserts the source's marker. It is bounded: under a
// synchronous scheme with no reachable standby the commit would wait
// forever, so the wait is cancelled and reported.
func (c *cluster) writeMarker(ctx context.Context, n *node, seq int64) error {
	wctx, cancel := context.WithTimeout(ctx, c.flowTimeout())
	defer cancel()
	err := n.exec(wctx, "", `INSERT INTO replab_marker (source, seq) VALUES ($1, $2)
		ON CONFLICT (source) DO UPDATE SET seq = EXCLUDED.seq, at = clock_timestamp()`, n.Name, seq)
	if err != nil && wctx.Err() != nil {
		return fmt.Errorf("node %s: a marker commit did not return in time: are the synchronous standbys unreachable? (the wait was cancelled; the row is committed locally)", n.Name)
	}
	return err
}

// waitMarker polls n until src's marker reaches seq. A standby draining a
// backlog (a saturated link's, after a measurement) shows an older marker
// for as long as the backlog lasts; its replay position moves, and counts
// as progress.
func (c *cluster) waitMarker(ctx context.Context, n *node, src string, seq int64) error {
	var stageErr *pipelineStageError
	_, err := enginekit.Poll{Stall: c.flowTimeout(), Permanent: func(err error) bool { return errors.As(err, &stageErr) }}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		var got int64
		var err error
		if c.isSink(n.Name) {
			got, err = c.sinks.QueryInt64(ctx, n.Name, "SELECT coalesce(max(seq), 0) FROM replab_marker WHERE source = ?", src)
		} else {
			err = n.query1(ctx, "", `SELECT coalesce(max(seq), 0) FROM replab_marker WHERE source = $1`, &got, src)
		}
		if err == nil && got < seq {
			err = c.pipelineDown() // a stage that died carries nothing more
		}
		state := fmt.Sprintf("still at %d", got)
		if err == nil && got < seq && !c.isSink(n.Name) {
			// NULL (so "") on a node not in recovery: only the marker counts there.
			var replayed string
			if n.query1(ctx, "", `SELECT coalesce(pg_last_wal_replay_lsn()::text, '')`, &replayed) == nil && replayed != "" {
				state += ", replayed to " + replayed
			}
		}
		return err == nil && got >= seq, state, err
	})
	if err != nil {
		return fmt.Errorf("node %s: marker %d from %s not visible: replication is not flowing: %w", n.Name, seq, src, err)
	}
	return nil
}

// flowTimeout bounds a marker's trip: generous for satellite links and for
// snapshot replicas that catch up only at their refresh interval.
func (c *cluster) flowTimeout() time.Duration {
	return 60*time.Second + 20*c.lab.Spec.WorstRoundTrip() + c.plan.refresh
}

// Close implements engine.Cluster: standbys and replicas first, then the
// sources, each with a bounded fast shutdown.
func (c *cluster) Close() error {
	c.closeOnce.Do(func() {
		if c.stopBg != nil {
			c.stopBg()
		}
		c.bg.Wait()
		c.stopPipeline() // before the servers: a stage finishes what it holds
		if c.sinks != nil {
			c.sinks.Close()
		}
		if c.plan.manager != nil {
			c.closeManaged()
			return
		}
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			if n.From != "" {
				wg.Add(1)
				go func() { defer wg.Done(); n.stop(15 * time.Second) }()
			}
		}
		wg.Wait()
		for _, n := range c.nodes {
			if n.From == "" {
				wg.Add(1)
				go func() { defer wg.Done(); n.stop(15 * time.Second) }()
			}
		}
		wg.Wait()
	})
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

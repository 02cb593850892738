package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
)

// Following the roles of a managed cluster (engine.RoleWatcher): every
// node's server is asked over its socket, every serverEvery, whether it
// is in recovery and whether its WAL receiver streams; its manager
// (Patroni's REST API, from the node's own site; repmgr's record at the
// node; pg_auto_failover's monitor, for every node at once) every
// managerEvery, what role it holds. Each change is a new period. The
// servers' view is the topology replab reports (Nodes): the nodes that
// take writes (out of recovery, and not read-only: pg_auto_failover
// promotes a standby read-only until the old primary has had time to
// demote itself) are the primaries, the others stream from the first of
// them.

const (
	serverEvery  = 100 * time.Millisecond
	managerEvery = 250 * time.Millisecond
	watchTimeout = 900 * time.Millisecond // one poll; a node slower than this is "down"
)

var _ engine.RoleWatcher = (*cluster)(nil)

// watcher polls the nodes' roles.
type watcher struct {
	c      *cluster
	stop   context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	open   map[[2]string]int // (node, source) -> index of its open period
	hist   []engine.RolePeriod
	server map[string]string // node -> its server's role now
	// manager is each node's role as its manager said it last.
	manager map[string]string
	// followMu orders the topology's updates: each takes the roles as
	// they are when it holds it, so the last update applies the latest
	// roles (an update from an older snapshot, applied after a newer one,
	// once left a cluster with no primary until a role changed again).
	followMu sync.Mutex
}

// startWatch starts following the roles.
func (c *cluster) startWatch() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{c: c, stop: cancel, open: map[[2]string]int{}, server: map[string]string{}, manager: map[string]string{}}
	c.watch = w
	for _, n := range c.nodes {
		w.done.Add(1)
		go func() { defer w.done.Done(); w.pollServer(ctx, n) }()
		if c.plan.manager.kind != ManagerPgAF {
			w.done.Add(1)
			go func() { defer w.done.Done(); w.pollManager(ctx, n) }()
		}
	}
	if c.plan.manager.kind == ManagerPgAF {
		w.done.Add(1)
		go func() { defer w.done.Done(); w.pollMonitor(ctx) }()
	}
}

// stopWatch ends it, closing the open periods.
func (c *cluster) stopWatch() {
	w := c.watch
	if w == nil {
		return
	}
	w.stop()
	w.done.Wait()
}

// RoleHistory implements engine.RoleWatcher.
func (c *cluster) RoleHistory() ([]engine.RolePeriod, time.Duration) {
	w := c.watch
	if w == nil {
		return nil, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.hist), serverEvery
}

// set records node's role as source says it at t.
func (w *watcher) set(node, source, role string, t time.Time) {
	w.mu.Lock()
	key := [2]string{node, source}
	i, ok := w.open[key]
	if ok && w.hist[i].Role == role {
		w.mu.Unlock()
		return
	}
	if ok {
		w.hist[i].End = t
	}
	w.open[key] = len(w.hist)
	w.hist = append(w.hist, engine.RolePeriod{Node: node, Source: source, Role: role, Start: t})
	var changed bool
	switch source {
	case engine.RoleFromServer:
		changed = w.server[node] != role
		w.server[node] = role
	case engine.RoleFromManager:
		w.manager[node] = role
	}
	w.mu.Unlock()
	if changed {
		w.followMu.Lock()
		w.c.followServers(w.serverRoles())
		w.followMu.Unlock()
	}
	if source == engine.RoleFromServer && ok {
		fmt.Fprintf(w.c.log, "node %s: %s (%s said at %s)\n", node, role, source, t.UTC().Format("15:04:05.000"))
	}
}

func (w *watcher) serverRoles() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.server))
	for k, v := range w.server {
		out[k] = v
	}
	return out
}

// managerRole is node's role as its manager said it last ("" before it
// said anything).
func (w *watcher) managerRole(node string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.manager[node]
}

// pollServer asks n's server for its role every serverEvery.
func (w *watcher) pollServer(ctx context.Context, n *node) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(serverEvery)
	defer tick.Stop()
	for {
		role := engine.RoleDown
		qctx, cancel := context.WithTimeout(ctx, watchTimeout)
		if conn == nil && n.pid() != 0 {
			conn, _ = pgx.Connect(qctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres connect_timeout=1", n.sockDir, n.addr.Port(), Superuser))
		}
		if conn != nil {
			var rec, readOnly bool
			var status string
			err := conn.QueryRow(qctx, `SELECT pg_is_in_recovery(), coalesce((SELECT status FROM pg_stat_wal_receiver LIMIT 1), ''),
				current_setting('default_transaction_read_only')::bool`).Scan(&rec, &status, &readOnly)
			switch {
			case err != nil:
				conn.Close(context.Background())
				conn = nil
			case !rec && !readOnly:
				role = engine.RolePrimary
			case !rec:
				role = engine.RoleReplica // promoted, but refusing writes (target_session_attrs=read-write skips it)
			case status == "streaming":
				role = engine.RoleStreaming
			default:
				role = engine.RoleReplica
			}
		}
		cancel()
		if conn != nil && role != engine.RolePrimary && w.c.plan.manager.kind == ManagerPgAF {
			// pg_autoctl 2.0 stops the server it ran for crash recovery
			// before a rewind with a smart shutdown, which waits for every
			// session to end, and starts pg_rewind without waiting for it:
			// a session held open here would keep an old primary from
			// rejoining. Only the primary keeps this connection.
			conn.Close(context.Background())
			conn = nil
		}
		if ctx.Err() != nil {
			w.closeOpen(n.Name, engine.RoleFromServer)
			return
		}
		w.set(n.Name, engine.RoleFromServer, role, time.Now())
		select {
		case <-ctx.Done():
			w.closeOpen(n.Name, engine.RoleFromServer)
			return
		case <-tick.C:
		}
	}
}

// pollManager asks n's manager for its role every managerEvery.
func (w *watcher) pollManager(ctx context.Context, n *node) {
	if w.c.plan.manager.kind == ManagerRepmgr {
		w.pollRepmgr(ctx, n)
		return
	}
	hc := siteHTTP(n.site, watchTimeout)
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(managerEvery)
	defer tick.Stop()
	url := "http://" + n.ha.rest.String() + "/patroni"
	for {
		role := engine.RoleDown
		body, code, err := httpGet(ctx, hc, url)
		if err == nil && code > 0 {
			var st struct {
				State string `json:"state"`
				Role  string `json:"role"`
			}
			if json.Unmarshal([]byte(body), &st) == nil {
				switch {
				case (st.Role == "master" || st.Role == "primary") && code == http.StatusOK:
					role = engine.RolePrimary
				case st.State == "running":
					role = engine.RoleStreaming // Patroni 3.0's "running" replica: its WAL receiver is not reported
				default:
					role = engine.RoleReplica
				}
			}
		}
		if ctx.Err() != nil {
			w.closeOpen(n.Name, engine.RoleFromManager)
			return
		}
		w.set(n.Name, engine.RoleFromManager, role, time.Now())
		select {
		case <-ctx.Done():
			w.closeOpen(n.Name, engine.RoleFromManager)
			return
		case <-tick.C:
		}
	}
}

// pollRepmgr asks n's server what repmgr recorded there: whether the
// node's own record says it is the active primary. (A node restarted as
// it was keeps its old record: it says it leads, as its repmgrd would.)
func (w *watcher) pollRepmgr(ctx context.Context, n *node) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(managerEvery)
	defer tick.Stop()
	for {
		role := engine.RoleDown
		qctx, cancel := context.WithTimeout(ctx, watchTimeout)
		if conn == nil && n.pid() != 0 {
			conn, _ = pgx.Connect(qctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres connect_timeout=1", n.sockDir, n.addr.Port(), Superuser))
		}
		if conn != nil {
			var typ string
			var active bool
			err := conn.QueryRow(qctx, `SELECT type, active FROM repmgr.nodes WHERE node_name = $1`, n.Name).Scan(&typ, &active)
			switch {
			case err != nil && qctx.Err() == nil && !strings.Contains(err.Error(), "no rows"):
				conn.Close(context.Background())
				conn = nil
			case err != nil:
			case typ == "primary" && active:
				role = engine.RolePrimary
			case active:
				role = engine.RoleStreaming
			default:
				role = engine.RoleReplica
			}
		}
		cancel()
		if ctx.Err() != nil {
			w.closeOpen(n.Name, engine.RoleFromManager)
			return
		}
		w.set(n.Name, engine.RoleFromManager, role, time.Now())
		select {
		case <-ctx.Done():
			w.closeOpen(n.Name, engine.RoleFromManager)
			return
		case <-tick.C:
		}
	}
}

// pollMonitor asks pg_auto_failover's monitor every managerEvery what
// state it assigned each node (pgafRole), over the monitor's socket. When
// the monitor does not answer, every node's manager is down.
func (w *watcher) pollMonitor(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(managerEvery)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, watchTimeout)
		if conn == nil && w.c.monitor.proc.PID() != 0 {
			conn, _ = w.c.monitor.connect(qctx)
		}
		var states map[string]pgafState
		if conn != nil {
			var err error
			if states, err = w.c.pgafStates(qctx, conn); err != nil {
				conn.Close(context.Background())
				conn = nil
			}
		}
		cancel()
		now := time.Now()
		for _, n := range w.c.nodes {
			if ctx.Err() != nil {
				break
			}
			st, ok := states[n.Name]
			w.set(n.Name, engine.RoleFromManager, pgafRole(st, ok), now)
		}
		select {
		case <-ctx.Done():
			for _, n := range w.c.nodes {
				w.closeOpen(n.Name, engine.RoleFromManager)
			}
			return
		case <-tick.C:
		}
	}
}

// closeOpen ends node's open period of source now.
func (w *watcher) closeOpen(node, source string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i, ok := w.open[[2]string{node, source}]; ok && w.hist[i].End.IsZero() {
		w.hist[i].End = time.Now()
	}
	delete(w.open, [2]string{node, source})
}

// followServers makes the topology what the servers say: the nodes not in
// recovery take writes; the others stream from the first of them. With
// none (an election under way) the last primary stays the upstream of
// the others, and nothing takes writes.
func (c *cluster) followServers(roles map[string]string) {
	c.topo.Lock()
	defer c.topo.Unlock()
	var primaries []string
	for _, n := range c.nodes {
		if roles[n.Name] == engine.RolePrimary {
			primaries = append(primaries, n.Name)
		}
	}
	c.plan.primaries = primaries
	for _, n := range c.nodes {
		if slices.Contains(primaries, n.Name) {
			n.Role, n.From = "primary", ""
			continue
		}
		n.Role = "standby"
		if len(primaries) > 0 {
			n.From = primaries[0]
		}
	}
}

// primaryNow is the one node the servers say takes writes, or "".
func (c *cluster) primaryNow() string {
	c.topo.RLock()
	defer c.topo.RUnlock()
	if len(c.plan.primaries) == 1 {
		return c.plan.primaries[0]
	}
	return ""
}

// waitPrimary waits until exactly one node takes writes, within the
// manager's election bound: a manager that never elects ends the wait
// with that said.
func (c *cluster) waitPrimary(ctx context.Context) (string, error) {
	return c.waitPrimaryWithin(ctx, c.plan.manager.electionBound())
}

func (c *cluster) waitPrimaryWithin(ctx context.Context, bound time.Duration) (string, error) {
	deadline := time.Now().Add(bound)
	for {
		if p := c.primaryNow(); p != "" {
			return p, nil
		}
		if time.Now().After(deadline) {
			c.topo.RLock()
			ps := slices.Clone(c.plan.primaries)
			c.topo.RUnlock()
			if len(ps) > 1 {
				return "", fmt.Errorf("manager %s: %d nodes take writes (%v) after %s: split brain", c.plan.manager.kind, len(ps), ps, bound)
			}
			return "", fmt.Errorf("manager %s elected no primary within %s (%s)", c.plan.manager.kind, bound.Round(time.Millisecond), c.plan.manager.boundWords())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(serverEvery):
		}
	}
}

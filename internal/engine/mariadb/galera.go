package mariadb

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Galera: every node a master of one synchronous cluster. The first node
// bootstraps it (--wsrep-new-cluster); the others join one at a time, each
// copying the whole data directory from a donor with rsync (SST) across
// its link, then applying write-sets in step with the others. A node cut
// off from the majority leaves the primary component and refuses queries
// (1047) until it is back; it then catches up from a donor's gcache (IST)
// when the gap is still there, or by a new SST.

const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraPorts are a node's group (gcomm), IST and SST ports: 4567, 4568
// and 4444 for a node on port 3306, shifted by ten per port after it so
// nodes sharing a site do not collide.
func (n *node) galeraPorts() (group, ist, sst int) {
	off := 10 * (int(n.addr.Port()) - DefaultPort)
	return 4567 + off, 4568 + off, 4444 + off
}

// galeraSettings are a Galera node's wsrep settings.
func (n *node) galeraSettings(s map[string]string) {
	p := n.c.plan
	var members []string
	for _, m := range n.c.nodes {
		g, _, _ := m.galeraPorts()
		members = append(members, fmt.Sprintf("%s:%d", m.addr.Addr(), g))
	}
	group, ist, sst := n.galeraPorts()
	addr := n.addr.Addr().String()
	opts := []string{
		fmt.Sprintf("gmcast.listen_addr=tcp://%s:%d", addr, group),
		fmt.Sprintf("ist.recv_addr=%s:%d", addr, ist),
		"gcache.size=" + p.gcache,
	}
	if p.fcLimit > 0 {
		opts = append(opts, "gcs.fc_limit="+strconv.FormatInt(p.fcLimit, 10))
	}
	if p.fcFactor != "" {
		opts = append(opts, "gcs.fc_factor="+p.fcFactor)
	}
	if p.provider != "" {
		opts = append(opts, strings.Trim(p.provider, "; "))
	}
	s["wsrep_on"] = "ON"
	s["wsrep_provider"] = galeraProvider
	s["wsrep_cluster_name"] = "replab-" + n.c.lab.Spec.Lab.Name
	s["wsrep_cluster_address"] = "gcomm://" + strings.Join(members, ",")
	s["wsrep_node_address"] = addr
	s["wsrep_node_name"] = n.Name
	s["wsrep_sst_method"] = "rsync"
	s["wsrep_sst_receive_address"] = fmt.Sprintf("%s:%d", addr, sst)
	s["wsrep_provider_options"] = `"` + strings.Join(opts, "; ") + `"`
	s["wsrep_sync_wait"] = strconv.FormatInt(p.syncWait, 10)
	s["wsrep_slave_threads"] = strconv.FormatInt(max(1, p.parThreads), 10)
	s["innodb_autoinc_lock_mode"] = "2" // interleaved: required by Galera
	s["wsrep_auto_increment_control"] = "ON"
}

// upGalera installs every node at once, bootstraps the first and joins
// the others one after the other (each SST blocks its donor).
func (c *cluster) upGalera(ctx context.Context) error {
	if err := enginekit.Each(c.nodes, func(n *node) error {
		if err := n.installDB(ctx); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	for i, n := range c.nodes {
		start := time.Now()
		var args []string
		if i == 0 {
			args = []string{"--wsrep-new-cluster"}
		}
		if err := n.startWith(ctx, args); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if err := c.waitSynced(ctx, n); err != nil {
			return err
		}
		how := "bootstrapped the cluster"
		if i > 0 {
			how = "joined (SST by rsync)"
		}
		fmt.Fprintf(c.log, "node %s: master MariaDB %s with Galera in %s, %s (%.2f s)\n", n.Name, c.version, n.Site, how, time.Since(start).Seconds())
	}
	return nil
}

// waitSynced polls n until it is a Synced member of the primary component.
func (c *cluster) waitSynced(ctx context.Context, n *node) error {
	_, err := enginekit.Poll{Stall: c.flowTimeout()}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		st, err := n.wsrepStatus(ctx)
		if err != nil {
			return false, "", err
		}
		state := st["wsrep_local_state_comment"] + ", " + st["wsrep_cluster_status"]
		return st["wsrep_local_state_comment"] == "Synced" && st["wsrep_cluster_status"] == "Primary" && st["wsrep_ready"] == "ON", state, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: not synced with the Galera cluster: %w", n.Name, err)
	}
	return nil
}

func (n *node) wsrepStatus(ctx context.Context) (map[string]string, error) {
	db, err := n.db()
	if err != nil {
		return nil, err
	}
	return globalStatus(ctx, db, "wsrep_%")
}

// galeraState is each running node's view of the cluster: its state word
// (wsrep_local_state_comment, with the cluster status when it is not
// Primary), its receive queue in write-sets, and Galera's counters
// verbatim as positions.
func (c *cluster) galeraState(ctx context.Context) ([]engine.ReplicaState, error) {
	var out []engine.ReplicaState
	for _, n := range c.nodes {
		if n.pid() == 0 {
			continue
		}
		st, err := n.wsrepStatus(ctx)
		if err != nil {
			return nil, fmt.Errorf("node %s: read wsrep status: %w", n.Name, err)
		}
		var others []string
		for _, m := range c.plan.sources {
			if m != n.Name {
				others = append(others, m)
			}
		}
		r := engine.ReplicaState{Node: n.Name, From: strings.Join(others, ","), Kind: "galera", BacklogUnit: engine.UnitWriteSets, ReplayLagMs: -1,
			State: st["wsrep_local_state_comment"]}
		if cs := st["wsrep_cluster_status"]; cs != "Primary" {
			r.State += " (" + cs + ")"
		}
		r.Backlog, _ = strconv.ParseInt(st["wsrep_local_recv_queue"], 10, 64)
		for _, k := range []string{"wsrep_last_committed", "wsrep_cluster_status", "wsrep_cluster_size", "wsrep_local_recv_queue_avg",
			"wsrep_flow_control_paused", "wsrep_flow_control_sent", "wsrep_flow_control_recv", "wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
			if v, ok := st[k]; ok {
				r.Positions = append(r.Positions, engine.Position{Name: strings.TrimPrefix(k, "wsrep_"), Value: v})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

var recoveredRE = regexp.MustCompile(`WSREP: Recovered position: ([0-9a-f-]+:-?[0-9]+)`)

// wsrepRecover reads the last committed position from InnoDB
// (mariadbd --wsrep-recover, as Debian's galera_recovery does): after a
// crash the node's grastate.dat says nothing, and a node started without
// its position would copy everything again (SST) instead of asking a
// donor for the write-sets it missed (IST). "" when none was found.
func (n *node) wsrepRecover(ctx context.Context) (string, error) {
	logp := n.logPath + ".recover"
	if err := n.writeOwned(logp, ""); err != nil {
		return "", err
	}
	defer os.Remove(logp)
	if err := n.run(ctx, serverBin, "--defaults-file="+n.cnfPath, "--wsrep-recover", "--log-error="+logp); err != nil {
		return "", fmt.Errorf("wsrep recovery: %w", err)
	}
	m := recoveredRE.FindStringSubmatch(readFile(logp))
	if m == nil || strings.HasSuffix(m[1], ":-1") {
		return "", nil
	}
	return m[1], nil
}

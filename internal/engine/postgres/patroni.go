package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"replab/internal/enginekit"
)

// Patroni (Debian's patroni 3.0.2) runs each node: replab starts one
// Patroni per node in the node's site, as the server user, with the store
// (etcd.go) as its DCS. Patroni initialises the primary (the spec's
// primary bootstraps the cluster), copies the standbys, chooses the
// synchronous standby in synchronous_mode, fails over, and rejoins a
// failed primary with pg_rewind. It starts the postmaster detached (its
// parent is PID 1), so replab finds it through postmaster.pid and tracks
// it too: a kill of the node kills both, a close stops both.

// patroniBin is Debian's Patroni (its shebang is Debian's python3, which
// has the DCS modules; a python3 earlier on PATH may not).
const patroniBin = "/usr/bin/patroni"

// patroniRESTPort is the first REST API port in a site.
const patroniRESTPort = 8008

// patroniConfig is node n's Patroni configuration (JSON is YAML).
func (c *cluster) patroniConfig(n *node) map[string]any {
	m := c.plan.manager
	// Every node's settings: Patroni keeps them in the store and passes
	// the ones PostgreSQL needs alike everywhere on the command line.
	global := c.clusterSettings()
	for _, k := range []string{"synchronous_standby_names", "hot_standby"} {
		delete(global, k) // Patroni's own
	}
	global["wal_log_hints"] = "on" // pg_rewind needs it (or data checksums)
	global["logging_collector"] = "on"
	global["log_directory"] = n.ha.dir
	global["log_filename"] = "postgresql.log"
	global["log_file_mode"] = "0644"
	own := map[string]any{
		"unix_socket_directories": n.sockDir,
		// Which node a connection reached, whatever route it took.
		"replab.node":   n.Name,
		"log_directory": n.ha.dir,
	}
	for k, v := range n.Settings {
		own[k] = v
	}
	params := map[string]any{}
	for k, v := range global {
		params[k] = v
	}
	subnet := c.lab.Spec.Lab.Subnet.String()
	tags := map[string]any{}
	if containsName(m.noFailover, n.Name) {
		tags["nofailover"] = true
	}
	if containsName(m.noSync, n.Name) {
		tags["nosync"] = true
	}
	secs := func(d time.Duration) int { return int(d / time.Second) }
	return map[string]any{
		"scope":     "replab-" + c.lab.Spec.Lab.Name,
		"namespace": "/replab/",
		"name":      n.Name,
		"log":       map[string]any{"level": "INFO", "format": "%(asctime)s %(levelname)s: %(message)s"},
		"restapi": map[string]any{
			"listen":          n.ha.rest.String(),
			"connect_address": n.ha.rest.String(),
		},
		"etcd3": map[string]any{"hosts": c.store.endpoints(), "protocol": "http"},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl":                     secs(m.ttl),
				"loop_wait":               secs(m.loopWait),
				"retry_timeout":           secs(m.retryTimeout),
				"maximum_lag_on_failover": m.maxLag,
				"synchronous_mode":        m.syncMode,
				"synchronous_mode_strict": m.syncStrict,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"use_slots":     true,
					"parameters":    params,
				},
			},
			// As replab's own initdb (node.go): 1 MB WAL segments, no sync.
			"initdb": []any{map[string]any{"encoding": "UTF8"}, map[string]any{"locale": "C"}, map[string]any{"wal-segsize": "1"}, "no-sync"},
		},
		"postgresql": map[string]any{
			"listen":          n.addr.String(),
			"connect_address": n.addr.String(),
			"data_dir":        n.dataDir,
			"bin_dir":         c.inst.BinDir,
			"pgpass":          filepath.Join(n.ha.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]any{"username": Superuser},
				"replication": map[string]any{"username": Superuser},
				"rewind":      map[string]any{"username": Superuser},
			},
			"parameters": own,
			"pg_hba": []string{
				"local all all trust",
				"host all all " + subnet + " trust",
				"host replication all " + subnet + " trust",
			},
			"basebackup": []any{map[string]any{"checkpoint": "fast"}},
			// After a pg_rewind that failed, or a timeline that diverged:
			// remove the data directory and copy the leader again (Patroni
			// leaves the node down otherwise).
			"remove_data_directory_on_rewind_failure":     m.removeOnRewindFailure,
			"remove_data_directory_on_diverged_timelines": m.removeOnDivergedTimelines,
		},
		"tags": tags,
	}
}

func containsName(list []string, name string) bool {
	for _, s := range list {
		if s == name {
			return true
		}
	}
	return false
}

// writePatroniConfig writes n's configuration, owned by the server user.
func (c *cluster) writePatroniConfig(n *node) error {
	b, err := json.MarshalIndent(c.patroniConfig(n), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.ha.config, b, 0o600); err != nil {
		return err
	}
	return os.Chown(n.ha.config, c.uid, c.gid)
}

// startPatroni runs n's Patroni in its site.
func (c *cluster) startPatroni(n *node) error { return c.startDaemon(n) }

// upPatroni starts the store, the primary's Patroni (which bootstraps the
// cluster), then every standby's (each copies the primary), and waits
// until every standby streams and, in synchronous mode, one is
// synchronous. On error the caller closes what was started.
func (c *cluster) upPatroni(ctx context.Context) error {
	if _, err := os.Stat(patroniBin); err != nil {
		return fmt.Errorf("patroni is not installed (%s): run scripts/deps.sh ha, or apt-get install patroni python3-etcd etcd-server", patroniBin)
	}
	fmt.Fprintf(c.log, "manager %s\n", c.plan.manager.describe())
	st, err := c.startStore(ctx, c.plan.manager.storeSites)
	if err != nil {
		return err
	}
	c.store = st
	if err := c.layoutManaged(); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.writePatroniConfig(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	primary := c.byName[c.plan.primaries[0]]
	start := time.Now()
	if err := c.startPatroni(primary); err != nil {
		return err
	}
	if err := c.waitRole(ctx, primary, "primary", c.plan.manager.electionBound()+2*time.Minute); err != nil {
		return err
	}
	if err := primary.exec(ctx, "postgres", "CREATE DATABASE "+Database); err != nil {
		return err
	}
	if err := primary.exec(ctx, "", markerDDL); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: primary %s bootstrapped by patroni in %s (%.2f s)\n", primary.Name, c.inst.Version, primary.Site, time.Since(start).Seconds())
	var standbys []*node
	for _, n := range c.nodes {
		if n != primary {
			standbys = append(standbys, n)
		}
	}
	for _, n := range standbys {
		if err := c.startPatroni(n); err != nil {
			return err
		}
	}
	err = enginekit.Each(standbys, func(n *node) error {
		t := time.Now()
		if err := c.waitStreaming(ctx, primary, n); err != nil {
			return err
		}
		fmt.Fprintf(c.log, "node %s: standby of %s streaming, copied by patroni (%.2f s)\n", n.Name, primary.Name, time.Since(t).Seconds())
		return nil
	})
	if err != nil {
		return err
	}
	if c.plan.manager.syncMode {
		var names string
		_, err := enginekit.Poll{Interval: 100 * time.Millisecond, Stall: c.plan.manager.electionBound()}.Until(ctx, func(ctx context.Context) (bool, string, error) {
			err := primary.query1(ctx, "", `SELECT coalesce(string_agg(application_name, ', '), '') FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')`, &names)
			return err == nil && names != "", "no synchronous standby yet", nil
		})
		if err != nil {
			return fmt.Errorf("patroni chose no synchronous standby: %w", err)
		}
		fmt.Fprintf(c.log, "node %s: synchronous standby %s (patroni's synchronous_mode)\n", primary.Name, names)
	}
	c.startWatch()
	return nil
}

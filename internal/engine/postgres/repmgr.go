package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"replab/internal/enginekit"
)

// repmgr (Debian's postgresql-15-repmgr 5.3.3) runs each node: replab
// initialises the primary and registers it, clones every standby with
// `repmgr standby clone` run in the standby's site (the copy crosses the
// link), registers it, and runs repmgrd on every node. repmgrd fails over
// by itself (promote_command, follow_command); it does not bring a failed
// primary back: replab's heal of one does what an operator does — `repmgr
// node rejoin --force-rewind` towards the new primary — with rejoin =
// "rewind", or starts it as it was with rejoin = "none" (a second
// primary: repmgr fences nothing). Every server is started with pg_ctl,
// detached as repmgr itself starts and restarts it, and tracked through
// postmaster.pid, as under Patroni.

// repmgrConfig is node n's repmgr.conf.
func (c *cluster) repmgrConfig(n *node, id int) string {
	m := c.plan.manager
	bin := c.inst.BinDir
	conf := n.ha.config
	location := "default"
	if m.locationBySite {
		location = n.Site
	}
	priority := int64(100)
	if p, ok := m.priority[n.Name]; ok {
		priority = p
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	lines := []string{
		fmt.Sprintf("node_id=%d", id),
		"node_name=" + q(n.Name),
		"conninfo=" + q(fmt.Sprintf("host=%s port=%d user=%s dbname=postgres connect_timeout=2", n.addr.Addr(), n.addr.Port(), Superuser)),
		"data_directory=" + q(n.dataDir),
		"pg_bindir=" + q(bin),
		"location=" + q(location),
		fmt.Sprintf("priority=%d", priority),
		"failover=" + q(m.failover),
		"promote_command=" + q(fmt.Sprintf("%s/repmgr standby promote -f %s --log-to-file", bin, conf)),
		"follow_command=" + q(fmt.Sprintf("%s/repmgr standby follow -f %s --log-to-file --upstream-node-id=%%n", bin, conf)),
		fmt.Sprintf("reconnect_attempts=%d", m.reconnectAttempts),
		fmt.Sprintf("reconnect_interval=%d", int(m.reconnectInterval/time.Second)),
		fmt.Sprintf("monitor_interval_secs=%d", int(m.monitorInterval/time.Second)),
		"log_file=" + q(filepath.Join(n.ha.dir, "repmgr.log")),
		"use_replication_slots=yes",
		"service_start_command=" + q(fmt.Sprintf("%s/pg_ctl -D %s -l %s -w -t 120 start", bin, n.dataDir, n.logPath)),
		"service_stop_command=" + q(fmt.Sprintf("%s/pg_ctl -D %s -m fast -w -t 60 stop", bin, n.dataDir)),
		"service_restart_command=" + q(fmt.Sprintf("%s/pg_ctl -D %s -l %s -m fast -w -t 120 restart", bin, n.dataDir, n.logPath)),
		"repmgrd_pid_file=" + q(filepath.Join(n.ha.dir, "repmgrd.pid")),
	}
	return "# written by replab\n" + strings.Join(lines, "\n") + "\n"
}

// repmgrSettings are what every node's server needs besides replab's.
var repmgrSettings = map[string]string{"shared_preload_libraries": "repmgr", "wal_log_hints": "on"}

// runIn runs a program as the server user in n's site, bounded by ctx,
// and returns its output.
func (c *cluster) runIn(ctx context.Context, n *node, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	c.asServerUser(cmd)
	if n.ha != nil {
		// repmgr's temporary files go to TMPDIR (else /tmp, which the
		// server user may not write to).
		cmd.Env = append(cmd.Env, "TMPDIR="+n.ha.dir)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := n.site.Start(cmd); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Base(bin), err)
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args[:min(len(args), 4)], " "), err, enginekit.LastLines(out.String(), 5))
	}
	return out.String(), nil
}

// repmgrCmd runs repmgr -f n's configuration with args in n's site.
func (c *cluster) repmgrCmd(ctx context.Context, n *node, args ...string) (string, error) {
	return c.runIn(ctx, n, c.inst.bin("repmgr"), append([]string{"-f", n.ha.config}, args...)...)
}

// pgctlStart starts n's server with pg_ctl, detached as repmgr starts
// it, and waits until it accepts connections.
func (c *cluster) pgctlStart(ctx context.Context, n *node) error {
	if _, err := c.runIn(ctx, n, c.inst.bin("pg_ctl"), "-D", n.dataDir, "-l", n.logPath, "-w", "-t", "120", "start"); err != nil {
		return fmt.Errorf("node %s: %w (%s)", n.Name, err, tailFile(n.logPath, 3))
	}
	return nil
}

// upRepmgr builds the cluster under repmgr.
func (c *cluster) upRepmgr(ctx context.Context) error {
	if _, err := os.Stat(c.inst.bin("repmgrd")); err != nil {
		return fmt.Errorf("repmgr is not installed (%s): run scripts/deps.sh ha, or apt-get install postgresql-%d-repmgr", c.inst.bin("repmgrd"), c.inst.Major)
	}
	m := c.plan.manager
	loc := "the same location"
	if m.locationBySite {
		loc = "each its site's location"
	}
	fmt.Fprintf(c.log, "manager repmgr: failover %s, reconnect_attempts %d, reconnect_interval %s, monitor_interval %s, %s; heal of a failed primary: %s\n",
		m.failover, m.reconnectAttempts, m.reconnectInterval, m.monitorInterval, loc, m.rejoin)
	if err := c.layoutManaged(); err != nil {
		return err
	}
	for i, n := range c.nodes {
		n.ha.config = filepath.Join(n.ha.dir, "repmgr.conf")
		n.ha.logPath = filepath.Join(n.ha.dir, "repmgrd.log")
		if err := os.WriteFile(n.ha.config, []byte(c.repmgrConfig(n, i+1)), 0o600); err != nil {
			return err
		}
		if err := os.Chown(n.ha.config, c.uid, c.gid); err != nil {
			return err
		}
	}
	primary := c.byName[c.plan.primaries[0]]
	start := time.Now()
	if err := primary.initdb(ctx); err != nil {
		return fmt.Errorf("node %s: %w", primary.Name, err)
	}
	if err := primary.writeConfig(repmgrSettings); err != nil {
		return fmt.Errorf("node %s: configure: %w", primary.Name, err)
	}
	if err := c.pgctlStart(ctx, primary); err != nil {
		return err
	}
	if err := primary.exec(ctx, "postgres", "CREATE DATABASE "+Database); err != nil {
		return err
	}
	if err := primary.exec(ctx, "", markerDDL); err != nil {
		return err
	}
	if _, err := c.repmgrCmd(ctx, primary, "primary", "register"); err != nil {
		return fmt.Errorf("node %s: %w", primary.Name, err)
	}
	fmt.Fprintf(c.log, "node %s: primary %s started and registered with repmgr in %s (%.2f s)\n", primary.Name, c.inst.Version, primary.Site, time.Since(start).Seconds())
	var standbys []*node
	for _, n := range c.nodes {
		if n != primary {
			standbys = append(standbys, n)
		}
	}
	err := enginekit.Each(standbys, func(n *node) error {
		t := time.Now()
		if _, err := c.repmgrCmd(ctx, n, "-h", primary.addr.Addr().String(), "-p", fmt.Sprint(primary.addr.Port()), "-U", Superuser, "-d", "postgres",
			"standby", "clone", "--fast-checkpoint"); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		// The clone has the primary's files, its node.conf included.
		if err := n.writeConfig(repmgrSettings); err != nil {
			return fmt.Errorf("node %s: configure: %w", n.Name, err)
		}
		if err := c.pgctlStart(ctx, n); err != nil {
			return err
		}
		if _, err := c.repmgrCmd(ctx, n, "standby", "register"); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if err := c.waitStreaming(ctx, primary, n); err != nil {
			return err
		}
		fmt.Fprintf(c.log, "node %s: standby of %s streaming, cloned by repmgr across the link (%.2f s)\n", n.Name, primary.Name, time.Since(t).Seconds())
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.startDaemon(n); err != nil {
			return err
		}
	}
	c.startWatch()
	return nil
}

// startRepmgrNode is the heal of a killed or stopped node under repmgr:
// its server, then repmgrd. A node that was primary while another took
// over is rejoined to the new primary (rejoin = "rewind", what an
// operator does) or started as it was (rejoin = "none").
func (c *cluster) startRepmgrNode(ctx context.Context, n *node) error {
	start := time.Now()
	if n.managedPostmasterPID() == 0 {
		_, standby := os.Stat(filepath.Join(n.dataDir, "standby.signal"))
		wasPrimary := standby != nil
		now := c.primaryNow()
		if wasPrimary && now != "" && now != n.Name && c.plan.manager.rejoin == "rewind" {
			up := c.byName[now]
			conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres connect_timeout=2", up.addr.Addr(), up.addr.Port(), Superuser)
			// pg_rewind first (it recovers a crashed server in single-user
			// mode, then takes from the new primary what diverged), then
			// repmgr node rejoin makes it a standby and starts it: what
			// --force-rewind does, with pg_rewind's own output kept.
			// A promoted server writes its new timeline into its control
			// file at its next checkpoint: until then pg_rewind reads the
			// old one and finds nothing to rewind (Patroni checkpoints
			// first too).
			if err := up.exec(ctx, "", "CHECKPOINT"); err != nil {
				return fmt.Errorf("node %s: checkpoint at %s before the rewind: %w", n.Name, now, err)
			}
			rw, err := c.runIn(ctx, n, c.inst.bin("pg_rewind"), "-D", n.dataDir, "--source-server="+conninfo, "--progress")
			_ = os.WriteFile(filepath.Join(n.ha.dir, "pg_rewind.log"), []byte(rw), 0o644)
			if err != nil {
				return fmt.Errorf("node %s: pg_rewind from %s: %w", n.Name, now, err)
			}
			// What repmgr node rejoin does next (it refuses a server that
			// pg_rewind left in recovery): a standby of the new primary,
			// started, its record updated.
			if err := c.followAfterRewind(n, up); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			if err := c.pgctlStart(ctx, n); err != nil {
				return err
			}
			if _, err := c.repmgrCmd(ctx, n, "standby", "register", "--force", "--upstream-node-id", fmt.Sprint(c.nodeID(now))); err != nil {
				return fmt.Errorf("node %s: register as a standby of %s: %w", n.Name, now, err)
			}
			fmt.Fprintf(c.log, "node %s: rewound and rejoined to %s (pg_rewind, repmgr node rejoin: %.2f s)\n", n.Name, now, time.Since(start).Seconds())
		} else {
			if wasPrimary && now != "" && now != n.Name {
				fmt.Fprintf(c.log, "node %s: started as it was, a primary, while %s is one (rejoin = \"none\")\n", n.Name, now)
			}
			if err := c.pgctlStart(ctx, n); err != nil {
				return err
			}
		}
	}
	if err := c.startDaemon(n); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: started again with repmgrd (%.2f s)\n", n.Name, time.Since(start).Seconds())
	return nil
}

// nodeID is a node's repmgr node_id: its place in the spec, from 1.
func (c *cluster) nodeID(name string) int {
	for i, n := range c.nodes {
		if n.Name == name {
			return i + 1
		}
	}
	return 0
}

// followAfterRewind makes n's data directory a standby of up: pg_rewind
// copied up's postgresql.auto.conf, whose primary_conninfo (if up was a
// standby once) names someone else; n's own goes into node.conf.
func (c *cluster) followAfterRewind(n, up *node) error {
	auto := filepath.Join(n.dataDir, "postgresql.auto.conf")
	if b, err := os.ReadFile(auto); err == nil {
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			t := strings.TrimSpace(l)
			if strings.HasPrefix(t, "primary_conninfo") || strings.HasPrefix(t, "primary_slot_name") {
				continue
			}
			keep = append(keep, l)
		}
		if err := os.WriteFile(auto, []byte(strings.Join(keep, "\n")), 0o600); err != nil {
			return err
		}
		_ = os.Chown(auto, c.uid, c.gid)
	}
	extra := map[string]string{"primary_conninfo": up.conninfo(n.Name) + " connect_timeout=2", "recovery_target_timeline": "latest"}
	for k, v := range repmgrSettings {
		extra[k] = v
	}
	if err := n.writeConfig(extra); err != nil {
		return err
	}
	sig := filepath.Join(n.dataDir, "standby.signal")
	if err := os.WriteFile(sig, nil, 0o600); err != nil {
		return err
	}
	return os.Chown(sig, c.uid, c.gid)
}

package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// upPhysical builds a primary and its standbys: each standby is copied
// with pg_basebackup run inside its own site, so the base backup crosses
// the emulated link (over a satellite link it takes as long as it would),
// then streams from its upstream through a replication slot.
func (c *cluster) upPhysical(ctx context.Context) error {
	primary := c.byName[c.plan.primaries[0]]
	if err := c.createPrimary(ctx, primary); err != nil {
		return err
	}
	// Parents before children: cascaded standbys copy from their upstream.
	// Siblings copy at the same time, each over its own link.
	done := map[string]bool{primary.Name: true}
	for len(done) < len(c.nodes) {
		var wave []*node
		for _, n := range c.nodes {
			if !done[n.Name] && done[n.From] {
				wave = append(wave, n)
			}
		}
		if len(wave) == 0 {
			return fmt.Errorf("standbys without a reachable primary") // the plan rules this out
		}
		g, gctx := errgroup.WithContext(ctx)
		for _, n := range wave {
			g.Go(func() error { return c.createStandby(gctx, n, c.byName[n.From]) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for _, n := range wave {
			done[n.Name] = true
		}
	}
	if c.plan.syncNames != "" {
		if err := c.setPrimarySetting(ctx, primary, "synchronous_standby_names", c.plan.syncNames); err != nil {
			return err
		}
		fmt.Fprintf(c.log, "node %s: synchronous_standby_names = '%s', synchronous_commit = %s\n", primary.Name, c.plan.syncNames, c.plan.commit)
	}
	return nil
}

// createStandby copies up's data directory into n's site and starts n as
// a standby of up.
func (c *cluster) createStandby(ctx context.Context, n, up *node) error {
	start := time.Now()
	fmt.Fprintf(c.log, "node %s: base backup from %s (%s -> %s), across the link\n", n.Name, up.Name, up.Site, n.Site)
	if err := os.RemoveAll(n.dataDir); err != nil {
		return err
	}
	if err := mkdirOwned(n.dataDir, c.uid, c.gid); err != nil {
		return err
	}
	// A physical slot on the upstream keeps the WAL the standby still
	// needs, however far behind the link makes it.
	_ = up.exec(ctx, "", "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", n.Name)
	err := n.run(ctx, "pg_basebackup",
		"-h", up.addr.Addr().String(), "-p", itoa(int(up.addr.Port())), "-U", Superuser,
		"-D", n.dataDir, "-X", "stream", "-c", "fast", "-C", "-S", n.Name, "--no-password",
		"--no-sync") // a lab's data is thrown away, as with initdb --no-sync
	if err != nil {
		return fmt.Errorf("node %s: base backup from %s: %w", n.Name, up.Name, err)
	}
	copied := dirSize(n.dataDir)
	extra := map[string]string{
		"primary_conninfo":  up.conninfo(n.Name),
		"primary_slot_name": n.Name,
	}
	if n.ApplyDelay > 0 {
		extra["recovery_min_apply_delay"] = fmt.Sprintf("%dms", n.ApplyDelay.Milliseconds())
	}
	if err := n.writeConfig(extra); err != nil {
		return fmt.Errorf("node %s: configure: %w", n.Name, err)
	}
	sig := filepath.Join(n.dataDir, "standby.signal")
	if err := os.WriteFile(sig, nil, 0o600); err != nil {
		return err
	}
	if err := os.Chown(sig, c.uid, c.gid); err != nil {
		return err
	}
	backup := time.Since(start)
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	fmt.Fprintf(c.log, "node %s: standby of %s streaming (base backup %.1f MB in %.2f s, ready after %.2f s)\n",
		n.Name, up.Name, float64(copied)/1e6, backup.Seconds(), time.Since(start).Seconds())
	return nil
}

// setPrimarySetting changes a setting in the cluster-wide file and reloads.
func (c *cluster) setPrimarySetting(ctx context.Context, n *node, key, value string) error {
	if err := n.exec(ctx, "", fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", key, value)); err != nil {
		return err
	}
	return n.exec(ctx, "", "SELECT pg_reload_conf()")
}

func dirSize(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	return total
}

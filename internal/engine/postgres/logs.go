package postgres

import (
	"io"
	"os"
	"path/filepath"

	"replab/internal/engine"
)

var _ engine.LogKeeper = (*cluster)(nil)

// KeepLogs implements engine.LogKeeper: each server's log and, under a
// manager, its manager's logs and the store's or the monitor's, into dir
// as NODE-FILE (etcd-SITE.log for the store, monitor-FILE for
// pg_auto_failover's monitor).
func (c *cluster) KeepLogs(dir string) error {
	if c.plan.manager == nil {
		return nil // the servers log little but warnings: nothing a run needs
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if n.ha == nil {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(n.ha.dir, "*.log"))
		if c.monitor != nil {
			// pg_auto_failover's servers log into their data directory
			// (a copied or rewound node starts with its source's files).
			logs, _ := filepath.Glob(filepath.Join(n.dataDir, "log", "*.log"))
			files = append(files, logs...)
		}
		for _, f := range files {
			if err := copyTail(f, filepath.Join(dir, n.Name+"-"+filepath.Base(f)), 8<<20); err != nil {
				return err
			}
		}
	}
	if mon := c.monitor; mon != nil {
		files, _ := filepath.Glob(filepath.Join(mon.pgdata, "log", "*.log"))
		for _, f := range append([]string{mon.logPath}, files...) {
			if err := copyTail(f, filepath.Join(dir, "monitor-"+filepath.Base(f)), 8<<20); err != nil {
				return err
			}
		}
	}
	if c.store != nil {
		for _, m := range c.store.members {
			if err := copyTail(m.logPath, filepath.Join(dir, "etcd-"+m.name+".log"), 8<<20); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyTail copies the last max bytes of src to dst; a missing src is no
// error.
func copyTail(src, dst string, max int64) error {
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err == nil && st.Size() > max {
		if _, err := in.Seek(st.Size()-max, io.SeekStart); err != nil {
			return err
		}
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

package postgres

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"replab/internal/enginekit"
	"strconv"
	"strings"
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
	if err := enginekit.MkdirOwned(n.dataDir, c.uid, c.gid); err != nil {
		return err
	}
	// A physical slot on the upstream keeps the WAL the standby still
	// needs, however far behind the link makes it. Reserved now, before
	// the backup starts, it also keeps the WAL the copy fetches at its end.
	if err := up.createSlot(ctx, n.Name); err != nil {
		return fmt.Errorf("node %s: replication slot on %s: %w", n.Name, up.Name, err)
	}
	if err := c.basebackup(ctx, n, up); err != nil {
		return fmt.Errorf("node %s: base backup from %s: %w", n.Name, up.Name, err)
	}
	copied := dirSize(n.dataDir)
	if err := n.writeConfig(standbyConf(n, up)); err != nil {
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

// standbyConf is a standby n's own settings when it streams from up:
// where it connects (named n, as synchronous_standby_names and
// pg_stat_replication name it), its slot there (named n too), its apply
// delay.
func standbyConf(n, up *node) map[string]string {
	conf := map[string]string{
		"primary_conninfo":  up.conninfo(n.Name) + " sslmode=" + sslMode(up),
		"primary_slot_name": n.Name,
	}
	if n.ApplyDelay > 0 {
		conf["recovery_min_apply_delay"] = fmt.Sprintf("%dms", n.ApplyDelay.Milliseconds())
	}
	return conf
}

// createSlot makes a physical replication slot named name on n, in place
// of any left from before, reserving WAL at once: on a standby from its
// last restartpoint on.
func (n *node) createSlot(ctx context.Context, name string) error {
	_ = n.exec(ctx, "", "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", name)
	return n.exec(ctx, "", "SELECT pg_create_physical_replication_slot($1, true)", name)
}

// basebackup copies up's data directory into n's with pg_basebackup run
// in n's site, logging the copy's progress.
func (c *cluster) basebackup(ctx context.Context, n, up *node) error {
	// -X fetch: the WAL written during the copy travels at its end inside
	// the (compressed) archive, on the connection that carried the data.
	// Streamed (-X stream), it took a second connection, whose congestion
	// window stayed small while the first filled the link's queue, and
	// carried uncompressed the zeros that end a segment at every other
	// copy's end: over 220 ms round trips 1 MB of WAL took 4 s. The slot
	// (created above) keeps that WAL until it is fetched.
	args := []string{"-h", up.addr.Addr().String(), "-p", itoa(int(up.addr.Port())), "-U", Superuser,
		"-D", n.dataDir, "-X", "fetch", "-c", "fast", "--no-password",
		"--no-sync",     // a lab's data is thrown away, as with initdb --no-sync
		"--no-manifest", // a standby never verifies its copy: 180 kB less to send
		"--progress"}
	if comp := c.inst.BackupCompress; comp != "" {
		args = append(args, "--compress="+comp) // decompressed by pg_basebackup: a plain copy
	}
	cmd := exec.CommandContext(ctx, c.inst.bin("pg_basebackup"), args...)
	c.asServerUser(cmd)
	cmd.Env = append(cmd.Env, "PGSSLMODE="+sslMode(up))
	p := &copyProgress{log: c.log, node: n.Name, start: time.Now(), now: time.Now}
	cmd.Stdout, cmd.Stderr = p, p
	cmd.WaitDelay = 5 * time.Second
	if err := n.site.Start(cmd); err != nil {
		return fmt.Errorf("pg_basebackup: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pg_basebackup: %w (%s)", ctx.Err(), enginekit.LastLines(p.output(), 3))
		}
		return fmt.Errorf("pg_basebackup: %v: %s", err, enginekit.LastLines(p.output(), 5))
	}
	return nil
}

// sslMode is how a standby connects to up. libpq's default ("prefer")
// first asks for TLS, which costs a round trip even when the server says
// no, as a lab's servers do unless the spec turns ssl on: 0.22 s per
// connection behind a 220 ms round trip.
func sslMode(up *node) string {
	v := strings.ToLower(strings.TrimSpace(up.Settings["ssl"]))
	// PostgreSQL's booleans: on, 1, and any prefix of true or yes.
	if v == "on" || v == "1" || v != "" && (strings.HasPrefix("true", v) || strings.HasPrefix("yes", v)) {
		return "prefer"
	}
	return "disable"
}

// progressRE matches pg_basebackup --progress lines: "1234/30399 kB (4%),
// 0/1 tablespace" (with a file name when verbose).
var progressRE = regexp.MustCompile(`^\s*(\d+)/(\d+) kB \(`)

// copyProgress takes pg_basebackup's output: its progress lines become
// log lines with bytes, rate and time left, at most one per
// progressInterval; everything else is kept for error messages.
type copyProgress struct {
	log   io.Writer
	node  string
	start time.Time
	now   func() time.Time

	buf    []byte
	other  strings.Builder
	lastAt time.Time // of the last log line (start before the first)
	lastB  int64     // bytes copied then
}

// progressInterval is how long to wait between two progress lines: a few
// seconds at first, then a tenth of the copy's age (at most a minute), so
// a copy over a 9.6 kbit/s link that takes hours logs tens of lines, not
// thousands.
func progressInterval(age time.Duration) time.Duration {
	return min(max(3*time.Second, age/10), time.Minute)
}

// Write implements io.Writer. pg_basebackup ends progress lines with \r
// on a terminal and \n otherwise.
func (p *copyProgress) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\r\n")
		if i < 0 {
			return len(b), nil
		}
		line := string(p.buf[:i])
		p.buf = p.buf[i+1:]
		if m := progressRE.FindStringSubmatch(line); m != nil {
			done, _ := strconv.ParseInt(m[1], 10, 64)
			total, _ := strconv.ParseInt(m[2], 10, 64)
			p.progress(done<<10, total<<10)
		} else if strings.TrimSpace(line) != "" {
			p.other.WriteString(line + "\n")
		}
	}
}

// output is what pg_basebackup wrote besides its progress lines.
func (p *copyProgress) output() string { return p.other.String() + string(p.buf) }

// progress logs one line when the interval has passed. The rate is the
// copy's (uncompressed bytes written) since the last line: compression
// makes the link carry fewer. The total is the server's estimate of the
// data directory, without the WAL streamed alongside.
func (p *copyProgress) progress(done, total int64) {
	now := p.now()
	if p.lastAt.IsZero() {
		p.lastAt = p.start
	}
	if now.Sub(p.lastAt) < progressInterval(now.Sub(p.start)) {
		return
	}
	rate := float64(done-p.lastB) / now.Sub(p.lastAt).Seconds()
	line := fmt.Sprintf("node %s: base backup %.1f of %.1f MB", p.node, float64(done)/1e6, float64(total)/1e6)
	if total > 0 {
		line += fmt.Sprintf(" (%d %%)", min(100, done*100/total))
	}
	line += fmt.Sprintf(", %.2f MB/s", rate/1e6)
	switch {
	case done >= total:
		line += ", finishing"
	case rate > 0:
		line += fmt.Sprintf(", about %s left", time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
	default:
		line += ", waiting for data"
	}
	fmt.Fprintln(p.log, line)
	p.lastAt, p.lastB = now, done
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

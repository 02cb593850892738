package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/engine/postgres"
	"replab/internal/lab"
	"replab/internal/spec"
)

// The diagnose step (not run by default) copies the same primary with
// pg_basebackup run by hand in the standbys' sites, across the issue's
// links, changing one thing at a time: what the engine runs, without the
// final fsync, with server-side LZ4 compression, and two copies at once
// over their two links.

// bbVariant is one way of taking the base backups.
type bbVariant struct {
	id       string
	args     []string // besides -h -p -U -D
	parallel bool     // s1 and s2 at once, else s1 only
	note     string
}

var bbVariants = []bbVariant{
	{"engine", []string{"-X", "stream", "-c", "fast"}, false, "what the engine runs (without its replication slot)"},
	{"no-sync", []string{"-X", "stream", "-c", "fast", "--no-sync"}, false, "without pg_basebackup's final fsync of the copy"},
	{"server-lz4", []string{"-X", "stream", "-c", "fast", "--no-sync", "--compress=server-lz4"}, false, "the server compresses with LZ4, pg_basebackup decompresses into the plain copy"},
	{"parallel", []string{"-X", "stream", "-c", "fast"}, true, "the engine's command towards s1 and s2 at the same time, each over its own link"},
}

// bbRun is one variant's measurement.
type bbRun struct {
	Variant   string  `json:"variant"`
	Seconds   float64 `json:"seconds"` // until every copy ended
	LinkBytes uint64  `json:"link_bytes"`
	transfer  `json:"s1_transfer"`
	S2        *transfer `json:"s2_transfer,omitempty"`
	Note      string    `json:"note"`
}

func (b *bench) diagnose(ctx context.Context) error {
	lc := linkConfs[0]
	name := "bench-pgsetup"
	body := lc.spec()
	// Only the primary: the standbys' sites receive copies by hand.
	body = body[:strings.Index(body, "[node.s1]")]
	s, err := spec.Parse(name+".toml", []byte(fmt.Sprintf("[lab]\nname = %q\n%s", name, body)))
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	l, err := benchkit.StartLab(ctx, s, logf)
	if err != nil {
		return fmt.Errorf("start lab: %w", err)
	}
	defer closeLab(l)
	c, err := postgres.Engine{}.Up(ctx, l, &timeline{echo: os.Stderr, start: time.Now()})
	if err != nil {
		return fmt.Errorf("engine up: %w", err)
	}
	defer c.Close()
	node := c.Nodes()[0]
	tmp, err := os.MkdirTemp("", "bench-pgsetup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var runs []bbRun
	for _, v := range bbVariants {
		if _, err := benchkit.WaitQuiet(ctx, quiet); err != nil {
			return err
		}
		sites := []string{"s1"}
		if v.parallel {
			sites = standbys
		}
		tl := newTimeline(l.Emulator(), os.Stderr, "db->s1", "db->s2")
		tl.begin()
		var wg sync.WaitGroup
		errs := make([]error, len(sites))
		for i, site := range sites {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dir := filepath.Join(tmp, v.id+"-"+site)
				args := append([]string{"-h", node.Addr.Addr().String(), "-p", strconv.Itoa(int(node.Addr.Port())), "-U", postgres.Superuser, "-D", dir, "--no-password"}, v.args...)
				errs[i] = runIn(ctx, l.Site(site), filepath.Join(filepath.Dir(postgresBin()), "pg_basebackup"), args...)
				_ = os.RemoveAll(dir)
			}()
		}
		wg.Wait()
		secs := time.Since(tl.start).Seconds()
		tl.end()
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("%s: %w", v.id, err)
			}
		}
		r := bbRun{Variant: v.id, Seconds: benchkit.Round(secs, 3), transfer: tl.transfer(0, 0, secs, lc.rateBps), Note: v.note}
		r.LinkBytes = r.transfer.LinkBytes
		if v.parallel {
			t2 := tl.transfer(1, 0, secs, lc.rateBps)
			r.S2 = &t2
			r.LinkBytes += t2.LinkBytes
		}
		runs = append(runs, r)
		line := fmt.Sprintf("      %-10s %.2f s for %.1f MB over the link(s) (s1: first data after %.2f s, ramp %.2f s, bulk %.1f Mbit/s, tail %.2f s, %d drops)",
			v.id, r.Seconds, float64(r.LinkBytes)/1e6, r.FirstDataS, r.RampS, r.BulkMbps, r.TailS, r.QueueDrops)
		if r.S2 != nil {
			line += fmt.Sprintf(" (s2: %.1f MB, first data after %.2f s, ramp %.2f s, bulk %.1f Mbit/s, tail %.2f s, %d drops)",
				float64(r.S2.LinkBytes)/1e6, r.S2.FirstDataS, r.S2.RampS, r.S2.BulkMbps, r.S2.TailS, r.S2.QueueDrops)
		}
		logf("%s", line)
	}
	for _, r := range runs {
		b.r.Add(Figure{
			Name: "diag_basebackup_" + strings.ReplaceAll(r.Variant, "-", "_") + "_s", Value: r.Seconds,
			Configured: map[string]any{"link": lc.describe(), "variant": r.Variant},
			Note:       r.Note, Details: map[string]any{"run": r},
		})
	}
	return nil
}

// runIn runs a client program inside site, bounded in time and killed
// when ctx ends.
func runIn(ctx context.Context, site *lab.Site, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.Dir = "/"
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := site.Start(cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(bin), err, strings.TrimSpace(out.String()))
	}
	return nil
}

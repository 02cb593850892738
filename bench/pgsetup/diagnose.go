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

// The diagnose step (not run by default) starts only the primary of the
// issue's lab and copies it with pg_basebackup run by hand in the
// standbys' sites, changing one thing at a time: towards the slowest
// standby uncompressed, with server-side LZ4, with server-side zstd, then
// with every option the engine uses; last, the engine's options towards
// every standby at once, each over its own link.

// bbVariant is one way of taking the base backups.
type bbVariant struct {
	id       string
	args     []string // besides -h -p -U -D
	parallel bool     // every standby at once, else the slowest only
	note     string
}

var bbVariants = []bbVariant{
	{"plain", []string{"-X", "stream", "-c", "fast", "--no-sync"}, false, "uncompressed, WAL streamed on a second connection (the engine before issue 10, but from a primary with 1 MB WAL segments)"},
	{"server-lz4", []string{"-X", "stream", "-c", "fast", "--no-sync", "--compress=server-lz4"}, false, "the server compresses with LZ4, pg_basebackup decompresses into the plain copy"},
	{"server-zstd", []string{"-X", "stream", "-c", "fast", "--no-sync", "--compress=server-zstd:level=1"}, false, "the server compresses with zstd level 1"},
	{"engine", engineArgs, false, "the engine's options (without its replication slot): zstd, WAL fetched at the end inside the archive, no manifest, progress"},
	{"parallel-stream", []string{"-X", "stream", "-c", "fast", "--no-sync", "--compress=server-zstd:level=1", "--no-manifest"}, true, "zstd with WAL streamed, towards every standby at the same time: each copy's WAL stream carries the zeros the other's end pads its segment with"},
	{"parallel", engineArgs, true, "the engine's options towards every standby at the same time, each over its own link"},
}

// engineArgs are the engine's pg_basebackup options besides the
// connection, the directory and its slot.
var engineArgs = []string{"-X", "fetch", "-c", "fast", "--no-sync", "--compress=server-zstd:level=1", "--no-manifest", "--progress"}

// bbRun is one variant's measurement.
type bbRun struct {
	Variant   string   `json:"variant"`
	Seconds   float64  `json:"seconds"` // until every copy ended
	LinkBytes uint64   `json:"link_bytes"`
	Copies    []bbCopy `json:"copies"`
	Note      string   `json:"note"`
}

// bbCopy is one copy of a variant.
type bbCopy struct {
	Node string `json:"node"`
	transfer
}

func (b *bench) diagnose(ctx context.Context) error {
	t := topologies[0]
	s, err := t.load()
	if err != nil {
		return err
	}
	links, err := standbyLinks(s)
	if err != nil {
		return err
	}
	text, err := t.toml()
	if err != nil {
		return err
	}
	var names []string
	for _, sl := range links {
		names = append(names, sl.Node)
	}
	// Only the primary: the standbys' sites receive copies by hand.
	if s, err = spec.Parse(t.describe(), []byte(primaryOnly(text, names))); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	s.Lab.Name = labName
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
	slowest := 0
	for i, sl := range links {
		if sl.RateBps < links[slowest].RateBps {
			slowest = i
		}
	}
	var dirs []string
	for _, sl := range links {
		dirs = append(dirs, sl.Dir)
	}

	var runs []bbRun
	for _, v := range bbVariants {
		if _, err := benchkit.WaitQuiet(ctx, quiet); err != nil {
			return err
		}
		which := []int{slowest}
		if v.parallel {
			which = nil
			for i := range links {
				which = append(which, i)
			}
		}
		tl := newTimeline(l.Emulator(), os.Stderr, dirs...)
		tl.begin()
		var wg sync.WaitGroup
		errs := make([]error, len(which))
		for k, i := range which {
			wg.Add(1)
			go func() {
				defer wg.Done()
				site := strings.SplitN(links[i].Dir, "->", 2)[1]
				dir := filepath.Join(tmp, v.id+"-"+site)
				args := append([]string{"-h", node.Addr.Addr().String(), "-p", strconv.Itoa(int(node.Addr.Port())), "-U", postgres.Superuser, "-D", dir, "--no-password"}, v.args...)
				errs[k] = runIn(ctx, l.Site(site), filepath.Join(filepath.Dir(postgresBin()), "pg_basebackup"), args...)
				_ = os.RemoveAll(dir)
			}()
		}
		wg.Wait()
		secs := time.Since(tl.start).Seconds()
		tl.end()
		if samplesDir != "" {
			if err := tl.writeCSV(filepath.Join(samplesDir, "diagnose-"+v.id+".csv")); err != nil {
				logf("      warning: %v", err)
			}
		}
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("%s: %w", v.id, err)
			}
		}
		r := bbRun{Variant: v.id, Seconds: benchkit.Round(secs, 3), Note: v.note}
		line := fmt.Sprintf("      %-11s %.2f s", v.id, r.Seconds)
		for _, i := range which {
			cp := bbCopy{Node: links[i].Node, transfer: tl.transfer(i, 0, secs, links[i].RateBps)}
			r.Copies = append(r.Copies, cp)
			r.LinkBytes += cp.LinkBytes
			line += fmt.Sprintf(" (%s: %.1f MB over the link, first data after %.2f s, ramp %.2f s, bulk %.1f Mbit/s, tail %.2f s, %d drops)",
				cp.Node, float64(cp.LinkBytes)/1e6, cp.FirstDataS, cp.RampS, cp.BulkMbps, cp.TailS, cp.QueueDrops)
		}
		runs = append(runs, r)
		logf("%s", line)
	}
	for _, r := range runs {
		b.r.Add(Figure{
			Name: "diag_basebackup_" + strings.ReplaceAll(r.Variant, "-", "_") + "_s", Value: r.Seconds,
			Configured: map[string]any{"topology": t.describe(), "variant": r.Variant},
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

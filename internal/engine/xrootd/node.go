package xrootd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
	"replab/internal/xrd"
)

// node is one xrootd in a site.
type node struct {
	spec.Node
	c    *cluster
	site *lab.Site
	addr netip.AddrPort
	base string // everything of the node lives under base

	proc atomic.Pointer[enginekit.Proc] // nil before the first start
}

func (n *node) dataDir() string  { return filepath.Join(n.base, "data") }
func (n *node) adminDir() string { return filepath.Join(n.base, "admin") }
func (n *node) cfgPath() string  { return filepath.Join(n.base, "xrootd.cfg") }

// logPath is where xrootd writes its log: -l FILE with -n NAME puts it in
// a directory named after the instance.
func (n *node) logPath() string { return filepath.Join(n.base, "log", n.Name, "xrootd.log") }

// config is the server's only configuration: the data set exported
// read-only, no DNS lookups (the lab has no resolver), admin and pid
// files in the node's directory.
func (n *node) config() string {
	return strings.Join([]string{
		"# written by replab: the only configuration this server reads",
		fmt.Sprintf("xrd.port %d", n.addr.Port()),
		"xrd.network nodnr",
		"all.export /replab r/o",
		"oss.localroot " + n.dataDir(),
		"all.adminpath " + n.adminDir(),
		"all.pidpath " + n.adminDir(),
		"",
	}, "\n")
}

// create writes the node's files and data set, starts it and waits until
// it answers.
func (n *node) create(ctx context.Context) error {
	for _, d := range []string{n.base, n.adminDir(), filepath.Join(n.base, "log")} {
		if err := enginekit.MkdirOwned(d, n.c.uid, n.c.gid); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := n.writeData(); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := os.WriteFile(n.cfgPath(), []byte(n.config()), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	err := n.start(ctx)
	var silent *silentExit
	if errors.As(err, &silent) {
		// Seen once in a clean-clone suite run (issue 17's session): a
		// fresh server exited within a fraction of a second without a
		// line in its log. A server that never got as far as its log
		// is started once more, and the log says so.
		fmt.Fprintf(n.c.log, "node %s: xrootd exited during start-up without a log line (%s); starting it again\n", n.Name, silent.status)
		err = n.start(ctx)
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// silentExit is a server that exited during start-up before it wrote a
// line to its log.
type silentExit struct{ status string }

func (e *silentExit) Error() string {
	return "xrootd exited during start-up (" + e.status + ") before writing its log"
}

// start runs xrootd in the node's site as the servers' user and waits
// until it answers a ping from that site.
func (n *node) start(ctx context.Context) error {
	cmd := exec.Command(serverBin, "-c", n.cfgPath(), "-l", filepath.Join(n.base, "log", "xrootd.log"), "-n", n.Name, "-I", "v4")
	enginekit.AsUser(cmd, n.c.uid, n.c.gid)
	out, err := os.OpenFile(filepath.Join(n.base, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	sv, err := enginekit.StartProc(n.site, cmd)
	if err != nil {
		return fmt.Errorf("start xrootd: %w", err)
	}
	n.proc.Store(sv)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := n.ping(ctx, 2*time.Second)
		if err == nil {
			return nil
		}
		select {
		case <-sv.Exited():
			tail := n.logTail()
			if tail == noLog {
				return &silentExit{status: sv.ExitStatus()}
			}
			return fmt.Errorf("xrootd exited during start-up (%s): %s", sv.ExitStatus(), tail)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("xrootd did not answer within 30 s: %v: %s", err, n.logTail())
		}
	}
}

// ping connects from the node's own site (no WAN link in the way) and
// sends kXR_ping.
func (n *node) ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := xrd.Dial(ctx, n.site.DialContext, n.addr.String(), "replab")
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Ping(ctx)
}

func (n *node) logTail() string {
	for _, p := range []string{n.logPath(), filepath.Join(n.base, "stdout.log")} {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return enginekit.LastLines(string(b), 4)
		}
	}
	return noLog
}

const noLog = "(no log)"

// pid is xrootd's PID while it runs; 0 when the node is down.
func (n *node) pid() int { return n.proc.Load().PID() }

// stop asks xrootd to exit (SIGTERM), killing it after timeout.
func (n *node) stop(timeout time.Duration) { n.proc.Load().Stop(syscall.SIGTERM, timeout) }

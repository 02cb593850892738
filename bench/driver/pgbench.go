package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/lab"
)

// findPgbench picks pgbench of the newest installed PostgreSQL, the
// version the engine runs.
func findPgbench() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(found) == 0 {
		return "", errors.New("pgbench is missing (no /usr/lib/postgresql/*/bin/pgbench): apt-get install postgresql-15")
	}
	major := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return n
	}
	sort.Slice(found, func(i, j int) bool { return major(found[i]) > major(found[j]) })
	return found[0], nil
}

// updateScript is pgbench's side of the comparison: the same statements
// per transaction as the driver sends (BEGIN, the UPDATE, COMMIT).
const updateScript = `\set aid random(1, 100000 * :scale)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
END;
`

// pgbenchResult is one pgbench run.
type pgbenchResult struct {
	TPS           float64 `json:"tps"` // pgbench's own, "without initial connection time"
	Transactions  int64   `json:"transactions"`
	LatencyMeanMs float64 `json:"latency_mean_ms"`
	Failed        int64   `json:"failed_transactions"`
	CPUSeconds    float64 `json:"cpu_s"`  // pgbench's user + system time (rusage of the child)
	SysSeconds    float64 `json:"sys_s"`  // its system time alone
	WallSeconds   float64 `json:"wall_s"` // process start to exit
}

var (
	reTPS     = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	reTxCount = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	reLatency = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	reFailed  = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// runPgbench runs pgbench in site with args, connecting to dsn; it is
// killed when ctx ends, so no pgbench outlives the bench.
func runPgbench(ctx context.Context, bin string, site *lab.Site, dsn string, timeout time.Duration, args ...string) (string, *os.ProcessState, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, dsn)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "PGAPPNAME=bench-pgbench"}
	cmd.Dir = "/"
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := site.Start(cmd); err != nil {
		return "", nil, 0, fmt.Errorf("start pgbench in %s: %w", site.Name, err)
	}
	err := cmd.Wait()
	wall := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return out.String(), cmd.ProcessState, wall, fmt.Errorf("pgbench %s: %w", strings.Join(args, " "), context.Cause(ctx))
		}
		return out.String(), cmd.ProcessState, wall, fmt.Errorf("pgbench %s: %v: %s", strings.Join(args, " "), err, lastLines(out.String(), 5))
	}
	return out.String(), cmd.ProcessState, wall, nil
}

// loadPgbench fills node db with pgbench's tables at compareScale, run
// from site. Every run starts from the same state: no autovacuum in the
// middle of one run and not another (the steps VACUUM and CHECKPOINT
// before each run instead).
func (b *bench) loadPgbench(ctx context.Context, p *pgLab, site string) error {
	db, err := p.node("db")
	if err != nil {
		return err
	}
	s := p.lab.Site(site)
	if s == nil {
		return fmt.Errorf("no site %s", site)
	}
	if err := pgbenchInit(ctx, b.pgbench, s, db.DSN, compareScale); err != nil {
		return err
	}
	return p.exec(ctx, "db", "ALTER TABLE pgbench_accounts SET (autovacuum_enabled = off)")
}

// pgbenchInit creates and fills the pgbench tables at the given scale.
func pgbenchInit(ctx context.Context, bin string, site *lab.Site, dsn string, scale int) error {
	_, _, _, err := runPgbench(ctx, bin, site, dsn, 3*time.Minute, "-i", "-q", "-s", strconv.Itoa(scale))
	return err
}

// pgbenchUpdates runs updateScript with `clients` clients and threads,
// prepared statements, for seconds.
func pgbenchUpdates(ctx context.Context, bin string, site *lab.Site, dsn string, clients, seconds int) (pgbenchResult, error) {
	script, err := os.CreateTemp("", "bench-driver-*.sql")
	if err != nil {
		return pgbenchResult{}, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(updateScript); err != nil {
		script.Close()
		return pgbenchResult{}, err
	}
	if err := script.Close(); err != nil {
		return pgbenchResult{}, err
	}
	n := strconv.Itoa(clients)
	return pgbenchRun(ctx, bin, site, dsn, seconds, "-n", "-f", script.Name(), "-M", "prepared", "-c", n, "-j", n, "-T", strconv.Itoa(seconds))
}

// pgbenchRun runs pgbench with args for about seconds and reads its
// figures.
func pgbenchRun(ctx context.Context, bin string, site *lab.Site, dsn string, seconds int, args ...string) (pgbenchResult, error) {
	out, st, wall, err := runPgbench(ctx, bin, site, dsn, time.Duration(seconds)*time.Second+time.Minute, args...)
	if err != nil {
		return pgbenchResult{}, err
	}
	r := pgbenchResult{WallSeconds: benchkit.Round(wall.Seconds(), 3), CPUSeconds: (st.UserTime() + st.SystemTime()).Seconds(), SysSeconds: st.SystemTime().Seconds()}
	m := reTPS.FindStringSubmatch(out)
	c := reTxCount.FindStringSubmatch(out)
	if m == nil || c == nil {
		return r, fmt.Errorf("pgbench: cannot read tps and transactions from: %s", lastLines(out, 8))
	}
	r.TPS, _ = strconv.ParseFloat(m[1], 64)
	r.Transactions, _ = strconv.ParseInt(c[1], 10, 64)
	if l := reLatency.FindStringSubmatch(out); l != nil {
		r.LatencyMeanMs, _ = strconv.ParseFloat(l[1], 64)
	}
	if f := reFailed.FindStringSubmatch(out); f != nil {
		r.Failed, _ = strconv.ParseInt(f[1], 10, 64)
	}
	return r, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

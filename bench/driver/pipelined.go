package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/stats"
	"replab/internal/workload"
	"replab/internal/workload/personnel"
)

// The pipelined comparison measures `replab run` itself — the replab
// binary, as a user runs it — against pgbench in pipeline mode on the
// same single-node server, both CPU-bound: one PostgreSQL node with
// synchronous_commit = off, the personnel workload's UPDATE, 1, 4 and 8
// clients in the server's own site. replab runs in target mode against the lab's
// server (one server, one table, for both tools), so the two alternate
// seconds apart: on this shared machine the speed of the same run wanders
// by ±15 % within a minute, and a replab run that built a lab of its own
// each time came 25 s after the pgbench run it was compared with, on a
// fresh server.
const (
	pipePersons = personnel.DefaultPersons
	pipeWarmup  = 2 * time.Second
	pipeSeconds = 10
	// pipeImplicitUsers is the count at which pgbench also sends what
	// replab sends (no BEGIN and END): the clients' cost alone, a
	// reference measured at one count.
	pipeImplicitUsers = 4
)

// pipeRounds per client count (-pipelined-rounds): the tools' order
// rotated each round and reversed after a full rotation. Rounds differ
// by ±10-20 %; six left ±0.1-0.19 of 95 % CI at 4 users, twelve
// ±0.05-0.07; eight per count keep the three counts within a quarter of
// an hour.
var pipeRounds = 8

// pipeUserCounts are the client counts compared: one client (latency
// bound: each transaction's client work is on its critical path), and
// four and eight (CPU bound, the clients and the server share the cores).
var pipeUserCounts = []int{1, 4, 8}

// pgbenchThreads is pgbench's -j for n clients: one thread per client,
// at most one per CPU (pgbench's advice: more threads than CPUs only
// switch).
func pgbenchThreads(n int) int { return max(1, min(n, runtime.NumCPU())) }

// pipeBody is the lab: its one PostgreSQL node holds the data both tools
// use. A lab needs two sites; both clients run in db, so no traffic
// crosses the link.
var pipeBody = `
[site.db]
[site.client]
[[link]]
sites = ["db", "client"]
rate = "unlimited"

[engine]
kind = "postgres"

[node.db]
site = "db"
role = "primary"

[node.db.settings]
synchronous_commit = "off"
`

// pipeSchema is where the target runs keep personnel's tables; the
// database's search_path points there, so pgbench and the variants find
// them too.
const pipeSchema = "replab"

// pipeTarget is replab's spec: the lab's node as a target, from site db.
// The first run (create) makes the schema, loads personnel and keeps it;
// the measured ones use it as it is.
func pipeTarget(dsn string, create bool, users int) string {
	return fmt.Sprintf(`[target]
name = "bench-pipe"
engine = "postgres"
site = "db"
schema = %q
create_schema = %t
keep_schema = true

[target.node.db]
role = "primary"
dsn = %q
site = "db"
`, pipeSchema, create, dsn) + pipeWorkload(users)
}

// pipeWorkload is the workload and run of replab's spec.
func pipeWorkload(users int) string {
	return fmt.Sprintf(`
[workload]
kind = "personnel"
persons = %d

[run]
users = %d
warmup = "%s"
duration = "%ds"
`, pipePersons, users, pipeWarmup, pipeSeconds)
}

// pipeScript is pgbench's side: personnel's UPDATE (the same statement
// text, parameters $1 = :text, $2 = :id under -M prepared) between BEGIN
// and END (block), the whole transaction in one pipeline, one Sync; or
// without them, an implicit transaction, as replab sends it.
func pipeScript(persons int, block bool) string {
	begin, end := "BEGIN;\n", "END;\n"
	if !block {
		begin, end = "", ""
	}
	return fmt.Sprintf("\\set id random(1, %d)\n\\startpipeline\n%sUPDATE per SET per_dscrptn_text = :text WHERE per_id = :id;\n%s\\endpipeline\n", persons, begin, end)
}

// The tools of the pipelined step: pgbench with the script
// (BEGIN … END), pgbench without them (what replab sends: the protocol's
// implicit transaction), and replab run.
const (
	toolPgbench         = "pgbench"
	toolPgbenchImplicit = "pgbench-implicit"
	toolReplab          = "replab"
)

// pipelined runs rounds of pgbench (both scripts) and replab run.
func (b *bench) pipelined(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "bench-pipe-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := replabBinary(ctx, dir)
	if err != nil {
		return err
	}
	p, err := upPostgres(ctx, "bench-pgpipe", pipeBody)
	if err != nil {
		return err
	}
	defer p.close()
	db, err := p.node("db")
	if err != nil {
		return err
	}
	// specs[0] creates and loads the schema; specs[n] runs n users on it.
	specs := map[int]string{}
	for _, n := range append([]int{0}, pipeUserCounts...) {
		specs[n] = filepath.Join(dir, fmt.Sprintf("target-%d.toml", n))
		if err := os.WriteFile(specs[n], []byte(pipeTarget(db.DSN, n == 0, max(n, 1))), 0o644); err != nil {
			return err
		}
	}
	// The WAL position is read through one pool for the whole step.
	wal, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return err
	}
	defer wal.Close()
	wal.SetMaxOpenConns(1)
	t0 := time.Now()
	if _, err := b.replabTarget(ctx, p, wal, bin, specs[0], dir, 1, nil); err != nil {
		return fmt.Errorf("first replab run (schema, load): %w", err)
	}
	logf("      first replab run (schema %s, personnel's %d persons loaded, not counted) in %.1f s", pipeSchema, pipePersons, time.Since(t0).Seconds())
	if err := p.exec(ctx, "db", fmt.Sprintf("ALTER DATABASE %s SET search_path = %s", postgres.Database, pipeSchema)); err != nil {
		return err
	}
	w, err := personnelWorkload()
	if err != nil {
		return err
	}
	// pgbench cannot make random text: one text of the workload's size,
	// made as the workload makes them, sent as a parameter each time.
	text := personnel.Text(rand.New(rand.NewPCG(1, 2)), personnel.DefaultTextBytes)
	idle := idleCores(ctx)
	logf("      this process uses %.3f cores while idle (pgbench's lab up, no traffic)", idle)

	for _, users := range pipeUserCounts {
		tools := []string{toolPgbench, toolReplab}
		if users == pipeImplicitUsers {
			tools = []string{toolPgbench, toolPgbenchImplicit, toolReplab}
		}
		var runs []toolRun
		for i := 1; i <= pipeRounds; i++ {
			// Each round in another order: every tool goes first and
			// last as often.
			k := (i - 1) % len(tools)
			order := append(slices.Clone(tools[k:]), tools[:k]...)
			if (i-1)/len(tools)%2 == 1 {
				slices.Reverse(order)
			}
			for _, tool := range append(order, pipeVariants...) {
				// Every run starts from the same table: vacuumed, checkpointed.
				if err := p.exec(ctx, "db", "VACUUM "+pipeSchema+".per", "CHECKPOINT"); err != nil {
					return err
				}
				q, err := benchkit.WaitQuiet(ctx, quiet)
				if err != nil {
					return err
				}
				var r toolRun
				switch tool {
				case toolPgbench, toolPgbenchImplicit:
					r, err = b.pgbenchPipelined(ctx, p, wal, text, tool == toolPgbench, users)
				case toolReplab:
					r, err = b.replabTarget(ctx, p, wal, bin, specs[users], dir, users, nil)
				case "replab-procs":
					// One P per user and two more: a user whose reply came
					// finds a P free instead of waiting for one.
					r, err = b.replabTarget(ctx, p, wal, bin, specs[users], dir, users, []string{"GOMAXPROCS=" + strconv.Itoa(users+2)})
					r.Tool = "replab-procs"
				case "driver":
					r, err = b.driverPersonnel(ctx, p, w, int64(i), users)
				case "pipe":
					r, err = b.barePipe(ctx, p, w, int64(i), users)
				}
				if err != nil {
					return fmt.Errorf("%s, %d users, round %d: %w", tool, users, i, err)
				}
				r.Run, r.Quiet = i, q
				runs = append(runs, r)
				logf("      %-16s %d users round %d: %8.0f tps, latency %.3f ms, client CPU %.1f µs/tx (system %.0f%%), server CPU %.1f µs/tx, WAL %.0f bytes/tx, machine busy %.0f%%, unrelated work %.2f cores",
					tool, users, i, r.TPS, r.LatencyMeanMs, r.ClientCPUUsPerTx, 100*r.ClientSysS/max(r.ClientCPUS, 1e-9), r.ServerCPUUsPerTx, r.WALBytesPerTx, 100*r.CPU.MachineBusy, r.UnrelatedCores)
			}
		}
		b.addPipelined(runs, idle, users)
	}
	return nil
}

// personnelWorkload is the personnel workload of replab's spec (its
// transactions, for the variants).
func personnelWorkload() (workload.Workload, error) {
	s, err := spec.Parse("bench-pgpipe.toml", []byte("[lab]\nname = \"bench-pgpipe\"\n"+pipeBody+pipeWorkload(1)))
	if err != nil {
		return nil, err
	}
	return workload.NewRegistry(personnel.Factory).For(s, "postgres")
}

// pipeVariants are the -pipelined-variants: runs that take replab run's
// client cost apart, on pgbench's server (not in the figures' means).
var pipeVariants []string

// driverPersonnel is driver.Run alone (no runner, no monitors, no lag
// probe) with personnel's transactions, on pgbench's server.
func (b *bench) driverPersonnel(ctx context.Context, p *pgLab, w workload.Workload, seed int64, users int) (toolRun, error) {
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return toolRun{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(users + 2)
	cfg := p.driverConfig(driver.Config{Users: users, Duration: pipeSeconds * time.Second, Seed: seed, MaxRetries: 3})
	srv0, meter, self0, sys0, t0 := nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), benchkit.SelfCPU(), selfSys(), time.Now()
	res, err := driver.Run(ctx, cfg, w.Transactions(), driver.Sources(db))
	self, sys, cpu, srv, wall := benchkit.SelfCPU()-self0, selfSys()-sys0, meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0, time.Since(t0).Seconds()
	if err != nil {
		return toolRun{}, err
	}
	if !res.Complete || res.Errors > 0 {
		return toolRun{}, fmt.Errorf("driver: %d errors, %s", res.Errors, res.StopReason)
	}
	return toolRun{
		Tool: "driver", Users: users, TPS: benchkit.Round(res.TPS, 1), Transactions: res.Transactions,
		LatencyMeanMs: benchkit.Round(res.CommitLatency.Mean, 3), ClientCPUS: benchkit.Round(self, 3), ClientSysS: benchkit.Round(sys, 3),
		ClientCPUUsPerTx: perTxUs(self, res.Transactions), ServerCPUUsPerTx: perTxUs(srv, res.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, self, srv, wall),
	}, nil
}

// barePipe is the engine's Pipe alone: users goroutines, each with
// its own Pipe, sending personnel's Batch (the same text making) with no
// driver around it.
func (b *bench) barePipe(ctx context.Context, p *pgLab, w workload.Workload, seed int64, users int) (toolRun, error) {
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return toolRun{}, err
	}
	defer db.Close()
	t := w.Transactions()[0]
	pipes := make([]engine.Pipe, users)
	defer func() {
		for _, pp := range pipes {
			if pp != nil {
				pp.Close()
			}
		}
	}()
	for i := range pipes {
		if pipes[i], err = p.cluster.(engine.Pipeliner).Pipe(ctx, db, []string{t.Statements[0].SQL}); err != nil {
			return toolRun{}, err
		}
	}
	var count atomic.Int64
	var firstErr atomic.Pointer[error]
	srv0, meter, self0, sys0, t0 := nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), benchkit.SelfCPU(), selfSys(), time.Now()
	end := t0.Add(pipeSeconds * time.Second)
	var wg sync.WaitGroup
	for i, pp := range pipes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(seed), uint64(i)+1))
			rows, pc, scratch := make([]int64, 1), make([]engine.PipeCall, 1), &workload.Scratch{}
			for time.Now().Before(end) && ctx.Err() == nil {
				pc[0] = engine.PipeCall{Stmt: 0, Args: t.Batch(i, r, scratch)[0].Args}
				err := pp.Run(ctx, pc, nil, rows)
				if err == nil && rows[0] != 1 {
					err = fmt.Errorf("%d rows changed", rows[0])
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0).Seconds()
	self, sys, cpu, srv := benchkit.SelfCPU()-self0, selfSys()-sys0, meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0
	if e := firstErr.Load(); e != nil {
		return toolRun{}, *e
	}
	n := count.Load()
	return toolRun{Tool: "pipe", Users: users, TPS: benchkit.Round(float64(n)/wall, 1), Transactions: n,
		ClientCPUS: benchkit.Round(self, 3), ClientSysS: benchkit.Round(sys, 3),
		ClientCPUUsPerTx: perTxUs(self, n), ServerCPUUsPerTx: perTxUs(srv, n), CPU: cpu, UnrelatedCores: unrelated(cpu, self, srv, wall)}, nil
}

// pgbenchPipelined runs pipeScript with users clients and
// pgbenchThreads(users) threads.
func (b *bench) pgbenchPipelined(ctx context.Context, p *pgLab, wal *sql.DB, text string, block bool, users int) (toolRun, error) {
	db, _ := p.node("db")
	site := p.lab.Site("db")
	script, err := os.CreateTemp("", "bench-pipe-*.sql")
	if err != nil {
		return toolRun{}, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(pipeScript(pipePersons, block)); err != nil {
		script.Close()
		return toolRun{}, err
	}
	if err := script.Close(); err != nil {
		return toolRun{}, err
	}
	args := []string{"-n", "-f", script.Name(), "-M", "prepared", "-D", "text=" + text, "-c", strconv.Itoa(users), "-j", strconv.Itoa(pgbenchThreads(users)), "-T"}
	// pgbench's warmup, as replab run's: the measured run starts on a
	// table that took pipeWarmup of updates since its VACUUM, as replab's
	// measure phase does. Right after a VACUUM the same run is faster
	// (its first 2 s 5-10 % above the next ones), which pgbench measured
	// and replab did not until 2026-11-27.
	warm := int(pipeWarmup / time.Second)
	if _, err := pgbenchRun(ctx, b.pgbench, site, db.DSN, warm, append(args, strconv.Itoa(warm))...); err != nil {
		return toolRun{}, fmt.Errorf("warmup: %w", err)
	}
	wal0, srv0, meter, t0 := walBytes(ctx, wal), nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), time.Now()
	res, err := pgbenchRun(ctx, b.pgbench, site, db.DSN, pipeSeconds, append(args, strconv.Itoa(pipeSeconds))...)
	cpu, srv, wall := meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0, time.Since(t0).Seconds()
	if err != nil {
		return toolRun{}, err
	}
	return toolRun{
		Tool: map[bool]string{true: toolPgbench, false: toolPgbenchImplicit}[block], Users: users, TPS: benchkit.Round(res.TPS, 1), Transactions: res.Transactions, Errors: res.Failed,
		LatencyMeanMs: res.LatencyMeanMs, ClientCPUS: benchkit.Round(res.CPUSeconds, 3), ClientSysS: benchkit.Round(res.SysSeconds, 3),
		ClientCPUUsPerTx: perTxUs(res.CPUSeconds, res.Transactions), ServerCPUUsPerTx: perTxUs(srv, res.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, res.CPUSeconds, srv, wall), WALBytesPerTx: benchkit.Round(float64(walBytes(ctx, wal)-wal0)/float64(max(res.Transactions, 1)), 1),
	}, nil
}

// replabBinary builds the replab command into dir (the bench runs from
// the repository's top, as make bench does).
func replabBinary(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "replab")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/replab")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/replab (run the bench from the repository's top): %v: %s", err, lastLines(string(out), 5))
	}
	return bin, nil
}

// replabTarget is one `replab run spec` of the replab binary in site db,
// against the lab's server. Its TPS and latency are its summary.json's
// (measure phase); its CPU is the process's (/proc/PID/stat, all its
// threads) and the server's between the progress lines that bound the
// measure phase (see cpuWindow).
func (b *bench) replabTarget(ctx context.Context, p *pgLab, wal *sql.DB, bin, spec, dir string, users int, env []string) (toolRun, error) {
	out, err := os.MkdirTemp(dir, "results-*")
	if err != nil {
		return toolRun{}, err
	}
	defer os.RemoveAll(out)
	ctx, cancel := context.WithTimeout(ctx, pipeWarmup+pipeSeconds*time.Second+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", spec, "--out", out+"/results")
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}, env...)
	cmd.Dir = "/"
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	w := &cpuWindow{}
	cmd.Stdout, cmd.Stderr = w, w
	if err := p.lab.Site("db").Start(cmd); err != nil {
		return toolRun{}, fmt.Errorf("start replab in site db: %w", err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	w.setSample(func() progressMark {
		cpu, _, _ := benchkit.ProcTimes(pid)
		return progressMark{cpu: cpu, sys: procSys(pid), srv: nodeCPU(ctx, p.cluster, "db"), wal: walBytes(ctx, wal), at: time.Now(), meter: benchkit.StartCPU()}
	})
	if err := cmd.Wait(); err != nil {
		return toolRun{}, fmt.Errorf("replab run: %v (log: %s)", err, lastLines(w.text(), 5))
	}
	var sum report.Summary
	if b, err := os.ReadFile(filepath.Join(out, "results", "summary.json")); err != nil {
		return toolRun{}, fmt.Errorf("replab run: %w (log: %s)", err, lastLines(w.text(), 5))
	} else if err := json.Unmarshal(b, &sum); err != nil {
		return toolRun{}, fmt.Errorf("replab run: summary.json: %w", err)
	}
	if !sum.Complete {
		return toolRun{}, fmt.Errorf("replab run: %s", sum.StopReason)
	}
	m0, m1, tx, ok := w.measured()
	if !ok {
		return toolRun{}, fmt.Errorf("replab run: no progress lines to measure CPU over (log: %s)", lastLines(w.text(), 5))
	}
	cpuS, sysS, srv, wall := m1.cpu-m0.cpu, m1.sys-m0.sys, m1.srv-m0.srv, m1.at.Sub(m0.at).Seconds()
	cpu := m0.meter.Read()
	return toolRun{
		Tool: "replab", Users: users, TPS: benchkit.Round(sum.TPS, 1), Transactions: sum.Transactions, Errors: sum.Errors,
		LatencyMeanMs: benchkit.Round(sum.CommitLatency.Mean, 3), ClientCPUS: benchkit.Round(cpuS, 3), ClientSysS: benchkit.Round(sysS, 3),
		ClientCPUUsPerTx: perTxUs(cpuS, tx), ServerCPUUsPerTx: perTxUs(srv, tx), CPU: cpu,
		UnrelatedCores: unrelated(cpu, cpuS, srv, wall), WALBytesPerTx: benchkit.Round(float64(m1.wal-m0.wal)/float64(tx), 1),
	}, nil
}

// walBytes is the server's current WAL position in bytes (0 when it
// cannot be read), through one of the step's pool's connections (a new
// connection a second would add its cost to the server's measured CPU).
func walBytes(ctx context.Context, db *sql.DB) int64 {
	var n int64
	_ = db.QueryRowContext(ctx, "SELECT (pg_current_wal_lsn() - '0/0')::bigint").Scan(&n)
	return n
}

// cpuWindow is replab run's output: on every driver progress line (one a
// second, just after the second closed) it takes a sample (the client's
// and the server's CPU). The steady window runs from the last warmup line
// to the last measure line, and its transactions are the commits those
// measure lines report.
type cpuWindow struct {
	mu     sync.Mutex
	log    strings.Builder
	buf    []byte
	sample func() progressMark
	start  *progressMark // the last warmup line
	end    *progressMark // the last measure line
	tx     int64         // commits of the measure lines after start
}

type progressMark struct {
	cpu, sys float64 // the client's CPU seconds, all and system
	srv      float64 // the server's CPU seconds
	wal      int64   // the server's WAL position, bytes
	at       time.Time
	meter    benchkit.CPUMeter
}

func (w *cpuWindow) setSample(f func() progressMark) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sample = f
}

func (w *cpuWindow) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log.Write(p)
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		f := strings.Fields(line)
		// "measure      5s/12s     8519 tps  p99 …"
		if w.sample == nil || len(f) < 4 || f[3] != "tps" || !strings.Contains(f[1], "s/") {
			continue
		}
		commits, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "warmup":
			mark := w.sample()
			w.start, w.end, w.tx = &mark, nil, 0
		case "measure":
			if w.start != nil {
				mark := w.sample()
				w.end = &mark
				w.tx += int64(commits)
			}
		}
	}
}

func (w *cpuWindow) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.String()
}

// measured is the marks at the steady window's ends and the commits
// between them.
func (w *cpuWindow) measured() (start, end progressMark, tx int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start == nil || w.end == nil || w.tx == 0 {
		return progressMark{}, progressMark{}, 0, false
	}
	return *w.start, *w.end, w.tx, true
}

// addPipelined turns one client count's runs into figures: replab
// against pgbench with the script (the target), and at
// pipeImplicitUsers against pgbench sending what replab sends (no BEGIN
// and END), each with the ratios of the rounds.
func (b *bench) addPipelined(runs []toolRun, idle float64, users int) {
	by := map[string][]toolRun{}
	for _, r := range runs {
		by[r.Tool] = append(by[r.Tool], r)
	}
	mean := func(rs []toolRun, f func(toolRun) float64) float64 {
		var s float64
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(max(len(rs), 1))
	}
	tps := func(r toolRun) float64 { return r.TPS }
	cpuTx := func(r toolRun) float64 { return r.ClientCPUUsPerTx }
	srvTx := func(r toolRun) float64 { return r.ServerCPUUsPerTx }
	lat := func(r toolRun) float64 { return r.LatencyMeanMs }
	rl := by[toolReplab]
	threads := pgbenchThreads(users)
	pgbenchCmd := fmt.Sprintf("-n -M prepared -D text=<400 bytes> -c %d -j %d -T %d after a warmup run of the same with -T %d (replab's warmup)", users, threads, pipeSeconds, int(pipeWarmup/time.Second))
	tools := "pgbench and replab"
	if users == pipeImplicitUsers {
		tools = "pgbench, pgbench-implicit and replab"
	}
	cfg := map[string]any{
		"users": users, "client_site": "db", "node": "one primary, synchronous_commit = off",
		"transaction": "UPDATE per SET per_dscrptn_text = $1 WHERE per_id = $2, one a transaction (personnel, 400-byte text, per_id uniform in 1.." + strconv.Itoa(pipePersons) + ")",
		"replab":      fmt.Sprintf("the replab binary: replab run of a target spec (the lab's node, schema %s, personnel, %d users, warmup %s, measure %d s, lag_sample auto), in site db; the UPDATE and one Sync, an implicit transaction", pipeSchema, users, pipeWarmup, pipeSeconds),
		"order":       fmt.Sprintf("%d rounds of %s on one server and table, the order rotated each round and reversed after a full rotation; VACUUM per + CHECKPOINT before each run", pipeRounds, tools),
	}
	suffix := fmt.Sprintf("_%dusers", users)
	for _, c := range []struct{ tool, figure, script, note string }{
		{toolPgbench, "driver_vs_pgbench_pipelined" + suffix, `\startpipeline BEGIN; UPDATE …; END; \endpipeline`,
			"the issue's script: BEGIN and END as statements of their own"},
		{toolPgbenchImplicit, "driver_vs_pgbench_pipelined_implicit" + suffix, `\startpipeline UPDATE …; \endpipeline`,
			"what replab sends: the UPDATE as an implicit transaction (pgbench adds a Describe)"},
	} {
		pg := by[c.tool]
		if len(pg) == 0 {
			continue
		}
		var ratios []float64
		for i := range min(len(pg), len(rl)) {
			ratios = append(ratios, benchkit.Round(rl[i].TPS/pg[i].TPS, 3))
		}
		ci := stats.MeanCI(ratios, 0.95)
		conf := maps.Clone(cfg)
		conf["pgbench"] = pgbenchCmd + ", script: " + c.script
		f := Figure{
			Name: c.figure, Value: benchkit.Round(mean(rl, tps)/mean(pg, tps), 3), Configured: conf,
			Note: "mean replab run TPS (summary tps, measure phase) / mean pgbench TPS, runs on the same server seconds apart; both pipelined (one round trip per transaction); pgbench: " + c.note,
			Details: map[string]any{"pgbench_tps_mean": benchkit.Round(mean(pg, tps), 1), "replab_tps_mean": benchkit.Round(mean(rl, tps), 1),
				"per_round_ratio": ratios, "per_round_ratio_mean": benchkit.Round(ci.Mean, 3), "per_round_ratio_ci95": benchkit.Round(ci.HalfWidth, 3),
				"pgbench_latency_mean_ms": benchkit.Round(mean(pg, lat), 4), "replab_latency_mean_ms": benchkit.Round(mean(rl, lat), 4),
				"pgbench_client_cpu_us_per_tx": benchkit.Round(mean(pg, cpuTx), 2), "replab_client_cpu_us_per_tx": benchkit.Round(mean(rl, cpuTx), 2),
				"pgbench_server_cpu_us_per_tx": benchkit.Round(mean(pg, srvTx), 2), "replab_server_cpu_us_per_tx": benchkit.Round(mean(rl, srvTx), 2)},
		}
		if c.tool == toolPgbench {
			f.Target, f.TargetMin = ">= 1.0", benchkit.Ptr(1.0)
			f.Details["runs"], f.Details["idle_bench_process_cores"] = runs, idle
		}
		b.r.Add(f)
		logf("      %d users: replab / %s: %.3f (per round %v, mean %.3f ± %.3f, 95 %% CI); client CPU %.2f / %.2f µs/tx, server CPU %.2f / %.2f µs/tx",
			users, c.tool, f.Value, ratios, ci.Mean, ci.HalfWidth, mean(rl, cpuTx), mean(pg, cpuTx), mean(rl, srvTx), mean(pg, srvTx))
	}
	b.r.Add(Figure{Name: "replab_run_pipelined_cpu_us_per_tx" + suffix, Value: benchkit.Round(mean(rl, cpuTx), 2), Configured: cfg,
		Note: "the replab process's utime+stime (/proc/PID/stat, all its threads) from its last warmup progress line to its last measure one, per transaction committed meanwhile: the whole replab run (driver, monitors, lag probe)"})
	b.r.Add(Figure{Name: "pgbench_pipelined_cpu_us_per_tx" + suffix, Value: benchkit.Round(mean(by[toolPgbench], cpuTx), 2), Configured: cfg,
		Note: "pgbench's utime+stime (its rusage at exit) per transaction, the issue's script (BEGIN … END)"})
}

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/personnel"
)

// The pipelined comparison measures `replab run` itself (runner.Run: lab,
// engine, workload load, driver, monitors, lag probe, results) against
// pgbench in pipeline mode on the same single-node server, both
// CPU-bound: one PostgreSQL node with synchronous_commit = off, the
// personnel workload's UPDATE, 4 clients in the server's own site.
const (
	pipeUsers   = 4
	pipePersons = personnel.DefaultPersons
	pipeWarmup  = 2 * time.Second
	pipeSeconds = 10
	pipePairs   = 3 // pgbench, replab, ×3
)

// pipeSpec is the lab both tools run in: runner.Run builds it for each
// replab run (lab bench-run), the bench once for pgbench (lab
// bench-pgpipe), so both servers have the same settings and data.
func pipeSpec(name string) string {
	return fmt.Sprintf("[lab]\nname = %q\n", name) + pipeBody
}

// pipeBody is pipeSpec after its [lab] table. A lab needs two sites;
// the client runs in db (the source's site), so no traffic crosses the
// link.
var pipeBody = fmt.Sprintf(`
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

[workload]
kind = "personnel"
persons = %d

[run]
users = %d
warmup = "%s"
duration = "%ds"
`, pipePersons, pipeUsers, pipeWarmup, pipeSeconds)

// pipeScript is pgbench's side: personnel's UPDATE (the same statement
// text, parameters $1 = :text, $2 = :id under -M prepared) between BEGIN
// and END, the whole transaction in one pipeline, one Sync.
func pipeScript(persons int) string {
	return fmt.Sprintf(`\set id random(1, %d)
\startpipeline
BEGIN;
UPDATE per SET per_dscrptn_text = :text WHERE per_id = :id;
END;
\endpipeline
`, persons)
}

// pipelined alternates pgbench and replab run, pipePairs times.
func (b *bench) pipelined(ctx context.Context) error {
	p, err := upPostgres(ctx, "bench-pgpipe", pipeBody)
	if err != nil {
		return err
	}
	defer p.close()
	t0 := time.Now()
	w, err := loadPersonnel(ctx, p)
	if err != nil {
		return err
	}
	logf("      personnel (%d persons) loaded for pgbench in %.1f s", pipePersons, time.Since(t0).Seconds())
	// pgbench cannot make random text: one text of the workload's size,
	// made as the workload makes them, sent as a parameter each time.
	text := personnel.Text(rand.New(rand.NewPCG(1, 2)), personnel.DefaultTextBytes)
	idle := idleCores(ctx)
	logf("      this process uses %.3f cores while idle (pgbench's lab up, no traffic)", idle)

	var runs []toolRun
	for i := 1; i <= pipePairs; i++ {
		for _, tool := range append([]string{"pgbench", "replab"}, pipeVariants...) {
			if tool != "replab" {
				if err := p.exec(ctx, "db", "VACUUM per", "CHECKPOINT"); err != nil {
					return err
				}
			}
			q, err := benchkit.WaitQuiet(ctx, quiet)
			if err != nil {
				return err
			}
			var r toolRun
			switch tool {
			case "pgbench":
				r, err = b.pgbenchPipelined(ctx, p, text)
			case "replab":
				r, err = b.replabRunSpec(ctx)
			case "driver":
				r, err = b.driverPersonnel(ctx, p, w, int64(i))
			case "pipe":
				r, err = b.barePipe(ctx, p, w, int64(i))
			}
			if err != nil {
				return fmt.Errorf("%s run %d: %w", tool, i, err)
			}
			r.Run, r.Quiet = i, q
			runs = append(runs, r)
			logf("      %-7s %d users run %d: %8.0f tps, latency %.3f ms, client CPU %.1f µs/tx (system %.0f%%), server CPU %.1f µs/tx, machine busy %.0f%%, unrelated work %.2f cores",
				tool, pipeUsers, i, r.TPS, r.LatencyMeanMs, r.ClientCPUUsPerTx, 100*r.ClientSysS/max(r.ClientCPUS, 1e-9), r.ServerCPUUsPerTx, 100*r.CPU.MachineBusy, r.UnrelatedCores)
		}
	}
	b.addPipelined(runs, idle)
	return nil
}

// loadPersonnel creates the personnel tables at node db and loads them as
// replab run does (the same seed, so the same data).
func loadPersonnel(ctx context.Context, p *pgLab) (workload.Workload, error) {
	s, err := spec.Parse("bench-pgpipe.toml", []byte(pipeSpec("bench-pgpipe")))
	if err != nil {
		return nil, err
	}
	w, err := workload.NewRegistry(personnel.Factory).For(s, "postgres")
	if err != nil {
		return nil, err
	}
	if err := p.sql().ApplySchema(ctx, w.Schema()); err != nil {
		return nil, fmt.Errorf("create personnel: %w", err)
	}
	ld, err := p.cluster.(engine.BulkLoader).Loader(ctx, "db", "db")
	if err != nil {
		return nil, err
	}
	defer ld.Close()
	if err := w.Load(ctx, ld, func(int64) {}); err != nil {
		return nil, fmt.Errorf("load personnel: %w", err)
	}
	return w, nil
}

// pipeVariants are the -pipelined-variants: runs that take replab run's
// client cost apart, on pgbench's server (not in the figures' means).
var pipeVariants []string

// driverPersonnel is driver.Run alone (no runner, no monitors, no lag
// probe) with personnel's transactions, on pgbench's server.
func (b *bench) driverPersonnel(ctx context.Context, p *pgLab, w workload.Workload, seed int64) (toolRun, error) {
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return toolRun{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(pipeUsers + 2)
	cfg := p.driverConfig(driver.Config{Users: pipeUsers, Duration: pipeSeconds * time.Second, Seed: seed, MaxRetries: 3})
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
		Tool: "driver", Users: pipeUsers, TPS: benchkit.Round(res.TPS, 1), Transactions: res.Transactions,
		LatencyMeanMs: benchkit.Round(res.CommitLatency.Mean, 3), ClientCPUS: benchkit.Round(self, 3), ClientSysS: benchkit.Round(sys, 3),
		ClientCPUUsPerTx: perTxUs(self, res.Transactions), ServerCPUUsPerTx: perTxUs(srv, res.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, self, srv, wall),
	}, nil
}

// barePipe is the engine's Pipe alone: pipeUsers goroutines, each with
// its own Pipe, sending personnel's Batch (the same text making) with no
// driver around it.
func (b *bench) barePipe(ctx context.Context, p *pgLab, w workload.Workload, seed int64) (toolRun, error) {
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return toolRun{}, err
	}
	defer db.Close()
	t := w.Transactions()[0]
	pipes := make([]engine.Pipe, pipeUsers)
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
			rows := make([]int64, 1)
			for time.Now().Before(end) && ctx.Err() == nil {
				calls := t.Batch(i, r)
				err := pp.Run(ctx, []engine.PipeCall{{Stmt: 0, Args: calls[0].Args}}, nil, rows)
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
	return toolRun{Tool: "pipe", Users: pipeUsers, TPS: benchkit.Round(float64(n)/wall, 1), Transactions: n,
		ClientCPUS: benchkit.Round(self, 3), ClientSysS: benchkit.Round(sys, 3),
		ClientCPUUsPerTx: perTxUs(self, n), ServerCPUUsPerTx: perTxUs(srv, n), CPU: cpu, UnrelatedCores: unrelated(cpu, self, srv, wall)}, nil
}

// pgbenchPipelined runs pipeScript with pipeUsers clients and threads.
func (b *bench) pgbenchPipelined(ctx context.Context, p *pgLab, text string) (toolRun, error) {
	db, _ := p.node("db")
	site := p.lab.Site("db")
	script, err := os.CreateTemp("", "bench-pipe-*.sql")
	if err != nil {
		return toolRun{}, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(pipeScript(pipePersons)); err != nil {
		script.Close()
		return toolRun{}, err
	}
	if err := script.Close(); err != nil {
		return toolRun{}, err
	}
	n := strconv.Itoa(pipeUsers)
	srv0, meter, t0 := nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), time.Now()
	res, err := pgbenchRun(ctx, b.pgbench, site, db.DSN, pipeSeconds,
		"-n", "-f", script.Name(), "-M", "prepared", "-D", "text="+text, "-c", n, "-j", n, "-T", strconv.Itoa(pipeSeconds))
	cpu, srv, wall := meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0, time.Since(t0).Seconds()
	if err != nil {
		return toolRun{}, err
	}
	return toolRun{
		Tool: "pgbench", Users: pipeUsers, TPS: benchkit.Round(res.TPS, 1), Transactions: res.Transactions, Errors: res.Failed,
		LatencyMeanMs: res.LatencyMeanMs, ClientCPUS: benchkit.Round(res.CPUSeconds, 3), ClientSysS: benchkit.Round(res.SysSeconds, 3),
		ClientCPUUsPerTx: perTxUs(res.CPUSeconds, res.Transactions), ServerCPUUsPerTx: perTxUs(srv, res.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, res.CPUSeconds, srv, wall),
	}, nil
}

// replabRunSpec is one `replab run` of pipeSpec, in this process: the
// runner builds the lab, starts PostgreSQL, loads personnel, drives it
// (warmup, then measure) and tears everything down. The client's CPU is
// this process's over the driver's steady seconds, found from the
// runner's progress lines (see cpuWindow); the server's is the monitors'
// (summary.json roles of node db over the measure phase).
func (b *bench) replabRunSpec(ctx context.Context) (toolRun, error) {
	s, err := spec.Parse("bench-run.toml", []byte(pipeSpec("bench-run")))
	if err != nil {
		return toolRun{}, err
	}
	out, err := os.MkdirTemp("", "bench-run-*")
	if err != nil {
		return toolRun{}, err
	}
	defer os.RemoveAll(out)
	w := &cpuWindow{}
	sum, _, err := runner.Run(ctx, s, runner.Options{
		Out: out + "/results", Log: w,
		Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(personnel.Factory),
	})
	if err != nil {
		return toolRun{}, fmt.Errorf("replab run: %w (log: %s)", err, lastLines(w.text(), 5))
	}
	if !sum.Complete {
		return toolRun{}, fmt.Errorf("replab run: %s", sum.StopReason)
	}
	cpuS, sysS, tx, wall, meter, ok := w.measured()
	if !ok {
		return toolRun{}, fmt.Errorf("replab run: no progress lines to measure CPU over (log: %s)", lastLines(w.text(), 5))
	}
	var srv float64
	for _, r := range sum.Roles["db"] {
		srv += r.CPUS
	}
	cpu := meter.Read()
	return toolRun{
		Tool: "replab", Users: pipeUsers, TPS: benchkit.Round(sum.TPS, 1), Transactions: sum.Transactions, Errors: sum.Errors,
		LatencyMeanMs: benchkit.Round(sum.CommitLatency.Mean, 3), ClientCPUS: benchkit.Round(cpuS, 3), ClientSysS: benchkit.Round(sysS, 3),
		ClientCPUUsPerTx: perTxUs(cpuS, tx), ServerCPUUsPerTx: perTxUs(srv, sum.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, cpuS, srv*float64(tx)/float64(max(sum.Transactions, 1)), wall),
	}, nil
}

// cpuWindow is the runner's log: on every driver progress line (one a
// second, from the driver's own goroutine, just after the second closed)
// it reads this process's CPU time. The steady window runs from the last
// warmup line to the last measure line, and its transactions are the
// commits those measure lines report.
type cpuWindow struct {
	mu    sync.Mutex
	log   strings.Builder
	buf   []byte
	start *progressMark // the last warmup line
	end   *progressMark // the last measure line
	tx    int64         // commits of the measure lines after start
}

type progressMark struct {
	cpu   float64
	sys   float64
	at    time.Time
	meter benchkit.CPUMeter
}

func (w *cpuWindow) Write(p []byte) (int, error) {
	cpu, sys, at, meter := benchkit.SelfCPU(), selfSys(), time.Now(), benchkit.StartCPU()
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
		if len(f) < 4 || f[3] != "tps" || !strings.Contains(f[1], "s/") {
			continue
		}
		commits, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		mark := &progressMark{cpu: cpu, sys: sys, at: at, meter: meter}
		switch f[0] {
		case "warmup":
			w.start, w.end, w.tx = mark, nil, 0
		case "measure":
			if w.start != nil {
				w.end = mark
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

// measured is the CPU seconds (all, and system), commits and wall seconds of the steady
// window, and a machine meter started at its beginning (read it now: the
// window's end is a moment ago, and the teardown that followed is short).
func (w *cpuWindow) measured() (cpuS, sysS float64, tx int64, wall float64, meter benchkit.CPUMeter, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start == nil || w.end == nil || w.tx == 0 {
		return 0, 0, 0, 0, benchkit.CPUMeter{}, false
	}
	return w.end.cpu - w.start.cpu, w.end.sys - w.start.sys, w.tx, w.end.at.Sub(w.start.at).Seconds(), w.start.meter, true
}

// addPipelined turns the runs into figures.
func (b *bench) addPipelined(runs []toolRun, idle float64) {
	var pg, rl []toolRun
	for _, r := range runs {
		switch r.Tool {
		case "pgbench":
			pg = append(pg, r)
		case "replab":
			rl = append(rl, r)
		}
	}
	mean := func(rs []toolRun, f func(toolRun) float64) float64 {
		var s float64
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	tps := func(r toolRun) float64 { return r.TPS }
	cpuTx := func(r toolRun) float64 { return r.ClientCPUUsPerTx }
	srvTx := func(r toolRun) float64 { return r.ServerCPUUsPerTx }
	pgTPS, rlTPS := mean(pg, tps), mean(rl, tps)
	var pairs []float64
	for i := range min(len(pg), len(rl)) {
		pairs = append(pairs, benchkit.Round(rl[i].TPS/pg[i].TPS, 3))
	}
	cfg := map[string]any{
		"users": pipeUsers, "client_site": "db", "node": "one primary, synchronous_commit = off",
		"transaction": "BEGIN; UPDATE per SET per_dscrptn_text = $1 WHERE per_id = $2; COMMIT (personnel, 400-byte text, per_id uniform in 1.." + strconv.Itoa(pipePersons) + ")",
		"pgbench":     fmt.Sprintf(`-n -M prepared -D text=<400 bytes> -c %d -j %d -T %d, script: \startpipeline BEGIN; UPDATE …; END; \endpipeline`, pipeUsers, pipeUsers, pipeSeconds),
		"replab":      fmt.Sprintf("runner.Run of a spec (personnel, %d users, warmup %s, measure %d s, lag_sample auto), in this process", pipeUsers, pipeWarmup, pipeSeconds),
		"order":       "pgbench, replab, ×" + strconv.Itoa(pipePairs) + "; VACUUM per + CHECKPOINT before each pgbench run, a new lab for each replab run",
	}
	b.r.Add(Figure{
		Name: "driver_vs_pgbench_pipelined", Value: benchkit.Round(rlTPS/pgTPS, 3), Configured: cfg,
		Target: ">= 1.0", TargetMin: benchkit.Ptr(1.0),
		Note: "mean replab run TPS (summary tps, measure phase) / mean pgbench TPS over alternating runs; both pipelined (one round trip per transaction)",
		Details: map[string]any{"runs": runs, "pgbench_tps_mean": benchkit.Round(pgTPS, 1), "replab_tps_mean": benchkit.Round(rlTPS, 1), "per_pair_ratio": pairs,
			"pgbench_server_cpu_us_per_tx": benchkit.Round(mean(pg, srvTx), 2), "replab_server_cpu_us_per_tx": benchkit.Round(mean(rl, srvTx), 2),
			"idle_bench_process_cores": idle},
	})
	b.r.Add(Figure{Name: "replab_run_pipelined_cpu_us_per_tx", Value: benchkit.Round(mean(rl, cpuTx), 2), Configured: cfg,
		Note: "this process's utime+stime (/proc/self/stat) from the last warmup progress line to the last measure one, per transaction committed meanwhile: the whole replab run (driver, monitors, lag probe, link emulator)"})
	b.r.Add(Figure{Name: "pgbench_pipelined_cpu_us_per_tx", Value: benchkit.Round(mean(pg, cpuTx), 2), Configured: cfg,
		Note: "pgbench's utime+stime (its rusage at exit) per transaction"})
}

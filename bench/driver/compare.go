package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/driver"
	"replab/internal/workload"
)

// The comparison: the same single-row UPDATE by key, the same server, the
// same number of clients, pgbench and replab's driver alternating.
const (
	compareScale    = 10 // pgbench -i -s: 1,000,000 accounts
	compareSeconds  = 10
	comparePairs    = 2 // pgbench, replab, pgbench, replab
	compareAccounts = 100000 * compareScale
)

var compareUsers = []int{8, 1}

// compareSpec: the server in site db, a client site across an unshaped
// link (used with -client-site client).
const compareSpec = `
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
`

// updateSQL is the driver's side of the comparison.
const updateSQL = "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = $1"

// updateTx is a workload.TxType doing what updateScript does: one UPDATE
// of a uniformly random account (the driver wraps it in BEGIN/COMMIT).
func updateTx() workload.TxType { return updateTxOf(updateSQL) }

// updateTxOf is updateTx with the UPDATE in another table or dialect.
func updateTxOf(sql string) workload.TxType {
	return workload.TxType{
		Name: "update", Weight: 1, Statements: []workload.Statement{{Name: "update", SQL: sql}},
		Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
			aid := 1 + r.Int64N(compareAccounts)
			res, err := tx.Exec(ctx, "update", aid)
			if err != nil {
				return 0, fmt.Errorf("update account %d: %w", aid, err)
			}
			n, err := res.RowsAffected()
			if err != nil || n != 1 {
				return n, fmt.Errorf("update account %d: %d rows changed (%v), want 1", aid, n, err)
			}
			return n, nil
		},
		// The same update as one pipelined call: BEGIN, UPDATE, COMMIT
		// in one round trip (pgbench's script sends them one by one).
		Batch: func(_ int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
			return []workload.Call{{Stmt: "update", Args: []any{1 + r.Int64N(compareAccounts)}, Rows: 1}}
		},
	}
}

// toolRun is one measured run of either tool.
type toolRun struct {
	Tool          string  `json:"tool"` // pgbench or replab
	Users         int     `json:"users"`
	Run           int     `json:"run"`
	TPS           float64 `json:"tps"`
	Transactions  int64   `json:"transactions"`
	Errors        int64   `json:"errors"`
	LatencyMeanMs float64 `json:"latency_mean_ms"`
	// ClientCPUUsPerTx is the client's user + system CPU time divided by
	// its transactions: pgbench's from its rusage, the driver's from this
	// process's /proc/self/stat.
	ClientCPUS float64 `json:"client_cpu_s"`
	// ClientSysS is the system (kernel) part of ClientCPUS.
	ClientSysS       float64 `json:"client_sys_s"`
	ClientCPUUsPerTx float64 `json:"client_cpu_us_per_tx"`
	// ServerCPUUsPerTx is the primary's CPU (postmaster, its live and
	// finished children) over the run, per transaction.
	ServerCPUUsPerTx float64         `json:"server_cpu_us_per_tx"`
	CPU              benchkit.CPUUse `json:"cpu"`
	// UnrelatedCores is what the rest of the machine (neither this
	// client nor the server) used meanwhile, in cores: other work on a
	// shared machine takes CPU from both.
	UnrelatedCores float64 `json:"unrelated_cores"`
	// WALBytesPerTx is the server's WAL written per transaction (the
	// pipelined step: pg_current_wal_lsn over the run).
	WALBytesPerTx float64            `json:"wal_bytes_per_tx,omitempty"`
	Quiet         benchkit.QuietWait `json:"wait_for_quiet_machine"`
}

// unrelated is the machine's busy cores minus the client's and the
// server's own CPU, over wall seconds.
func unrelated(cpu benchkit.CPUUse, client, server, wall float64) float64 {
	return benchkit.Round(max(cpu.MachineBusy*float64(runtime.NumCPU())-(client+server)/wall, 0), 2)
}

// compare builds the lab, loads pgbench's tables and runs the pairs for
// each number of users.
func (b *bench) compare(ctx context.Context) error {
	p, err := upPostgres(ctx, "bench-driver", compareSpec)
	if err != nil {
		return err
	}
	defer p.close()
	t0 := time.Now()
	if err := b.loadPgbench(ctx, p, b.clientSite); err != nil {
		return err
	}
	logf("      pgbench -i -s %d from site %s in %.1f s", compareScale, b.clientSite, time.Since(t0).Seconds())

	for _, users := range compareUsers {
		var runs []toolRun
		for i := 1; i <= comparePairs; i++ {
			for _, tool := range []string{"pgbench", "replab"} {
				if err := p.exec(ctx, "db", "VACUUM pgbench_accounts", "CHECKPOINT"); err != nil {
					return err
				}
				quiet, err := benchkit.WaitQuiet(ctx, quiet)
				if err != nil {
					return err
				}
				var r toolRun
				if tool == "pgbench" {
					r, err = b.pgbenchRun(ctx, p, users)
				} else {
					r, err = b.replabRun(ctx, p, users, int64(i))
				}
				if err != nil {
					return fmt.Errorf("%s, %d users, run %d: %w", tool, users, i, err)
				}
				r.Run, r.Quiet = i, quiet
				runs = append(runs, r)
				logf("      %-7s %d users run %d: %8.0f tps, latency %.3f ms, client CPU %.1f µs/tx, server CPU %.1f µs/tx, machine busy %.0f%%, unrelated work %.2f cores",
					tool, users, i, r.TPS, r.LatencyMeanMs, r.ClientCPUUsPerTx, r.ServerCPUUsPerTx, 100*r.CPU.MachineBusy, r.UnrelatedCores)
			}
		}
		b.addCompare(users, runs)
	}
	return nil
}

func (b *bench) pgbenchRun(ctx context.Context, p *pgLab, users int) (toolRun, error) {
	db, _ := p.node("db")
	site := p.lab.Site(b.clientSite)
	srv0, meter, t0 := nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), time.Now()
	res, err := pgbenchUpdates(ctx, b.pgbench, site, db.DSN, users, compareSeconds)
	cpu, srv, wall := meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0, time.Since(t0).Seconds()
	if err != nil {
		return toolRun{}, err
	}
	return toolRun{
		Tool: "pgbench", Users: users, TPS: benchkit.Round(res.TPS, 1), Transactions: res.Transactions, Errors: res.Failed,
		LatencyMeanMs: res.LatencyMeanMs, ClientCPUS: benchkit.Round(res.CPUSeconds, 3),
		ClientCPUUsPerTx: perTxUs(res.CPUSeconds, res.Transactions), ServerCPUUsPerTx: perTxUs(srv, res.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, res.CPUSeconds, srv, wall),
	}, nil
}

func (b *bench) replabRun(ctx context.Context, p *pgLab, users int, seed int64) (toolRun, error) {
	db, err := p.sql().Open(ctx, "db", b.clientSite)
	if err != nil {
		return toolRun{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(users + 2)
	cfg := p.driverConfig(driver.Config{Users: users, Duration: compareSeconds * time.Second, Seed: seed, MaxRetries: 3})
	srv0, meter, self0, t0 := nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), benchkit.SelfCPU(), time.Now()
	res, err := driver.Run(ctx, cfg, []workload.TxType{updateTx()}, driver.Sources(db))
	self, cpu, srv, wall := benchkit.SelfCPU()-self0, meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0, time.Since(t0).Seconds()
	if err != nil {
		return toolRun{}, err
	}
	if !res.Complete {
		return toolRun{}, fmt.Errorf("driver: %s", res.StopReason)
	}
	return toolRun{
		Tool: "replab", Users: users, TPS: benchkit.Round(res.TPS, 1), Transactions: res.Transactions, Errors: res.Errors,
		LatencyMeanMs: benchkit.Round(res.CommitLatency.Mean, 3), ClientCPUS: benchkit.Round(self, 3),
		ClientCPUUsPerTx: perTxUs(self, res.Transactions), ServerCPUUsPerTx: perTxUs(srv, res.Transactions), CPU: cpu,
		UnrelatedCores: unrelated(cpu, self, srv, wall),
	}, nil
}

func perTxUs(seconds float64, tx int64) float64 {
	if tx <= 0 {
		return 0
	}
	return benchkit.Round(seconds/float64(tx)*1e6, 2)
}

// addCompare turns one user count's runs into figures.
func (b *bench) addCompare(users int, runs []toolRun) {
	var pg, rl []toolRun
	for _, r := range runs {
		if r.Tool == "pgbench" {
			pg = append(pg, r)
		} else {
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
	var pairs []float64 // each replab run over the pgbench run just before it
	for i := range min(len(pg), len(rl)) {
		pairs = append(pairs, benchkit.Round(rl[i].TPS/pg[i].TPS, 3))
	}
	cfg := map[string]any{
		"users": users, "client_site": b.clientSite, "transaction": "BEGIN; UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = uniform(1, 1000000); COMMIT",
		"pgbench": fmt.Sprintf("-n -f script -M prepared -c %d -j %d -T %d", users, users, compareSeconds),
		"driver":  fmt.Sprintf("driver.Run closed loop, %d users, warmup 0, measure %d s, no think time", users, compareSeconds),
		"scale":   compareScale, "duration_s": compareSeconds, "order": "pgbench, replab, pgbench, replab; VACUUM + CHECKPOINT before each run",
	}
	suffix := fmt.Sprintf("_%dusers", users)
	b.r.Add(Figure{
		Name: "driver_vs_pgbench" + suffix + "_ratio", Value: benchkit.Round(rlTPS/pgTPS, 3), Configured: cfg,
		Target: ">= 1.0", TargetMin: benchkit.Ptr(1.0),
		Note: "mean driver TPS / mean pgbench TPS over alternating runs, same server, same clients, same statements per transaction",
		Details: map[string]any{"runs": runs, "pgbench_tps_mean": benchkit.Round(pgTPS, 1), "replab_tps_mean": benchkit.Round(rlTPS, 1), "per_pair_ratio": pairs,
			"pgbench_server_cpu_us_per_tx": benchkit.Round(mean(pg, srvTx), 2), "replab_server_cpu_us_per_tx": benchkit.Round(mean(rl, srvTx), 2)},
	})
	b.r.Add(Figure{Name: "pgbench" + suffix + "_tps", Value: benchkit.Round(pgTPS, 1), Configured: cfg,
		Note: "pgbench's own tps (without initial connection time), mean of the runs"})
	b.r.Add(Figure{Name: "driver" + suffix + "_tps", Value: benchkit.Round(rlTPS, 1), Configured: cfg,
		Note: "driver.Result.TPS (measure phase), mean of the runs"})
	b.r.Add(Figure{Name: "driver_cpu" + suffix + "_us_per_tx", Value: benchkit.Round(mean(rl, cpuTx), 2), Configured: cfg,
		Note: "this process's utime+stime (/proc/self/stat, 10 ms ticks) over driver.Run, per committed transaction"})
	b.r.Add(Figure{Name: "pgbench_cpu" + suffix + "_us_per_tx", Value: benchkit.Round(mean(pg, cpuTx), 2), Configured: cfg,
		Note: "pgbench's utime+stime (its rusage at exit) per transaction"})
}

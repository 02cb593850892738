package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/bench/internal/benchkit"
)

// The diagnose step (not run by default) takes the driver's CPU per
// transaction apart: the same transactions from pgbench, from the driver
// as it runs in replab (GOMAXPROCS raised to 8 by the link emulator), from
// the driver with GOMAXPROCS = the core count, and from a bare pgx loop
// without database/sql and the driver, with BEGIN/UPDATE/COMMIT as three
// round trips and as one pipelined batch.

// diagVariant is one way of running the transactions.
type diagVariant struct {
	id         string
	gomaxprocs int // 0: leave as is
	note       string
}

var diagVariants = []diagVariant{
	{"pgbench", 0, "pgbench -M prepared, the script above"},
	{"driver", 0, "driver.Run as replab runs it (GOMAXPROCS as the emulator leaves it)"},
	{"driver-gomaxprocs", -1, "driver.Run with GOMAXPROCS = number of CPUs"},
	{"pgx-3rt", -1, "bare pgx.Conn loop, no database/sql: begin / prepared UPDATE / commit, three round trips; GOMAXPROCS = number of CPUs"},
	{"pgx-pipelined", -1, "bare pgx.Conn loop: begin, UPDATE, commit sent as one pipelined batch, one round trip; GOMAXPROCS = number of CPUs"},
}

func (b *bench) diagnose(ctx context.Context) error {
	p, err := upPostgres(ctx, "bench-driver", compareSpec)
	if err != nil {
		return err
	}
	defer p.close()
	if err := b.loadPgbench(ctx, p, b.clientSite); err != nil {
		return err
	}
	idle := idleCores(ctx)
	logf("      this process uses %.3f cores while idle (lab and emulator up, no traffic)", idle)
	var all []toolRun
	for _, users := range compareUsers {
		for _, v := range diagVariants {
			if err := p.exec(ctx, "db", "VACUUM pgbench_accounts", "CHECKPOINT"); err != nil {
				return err
			}
			quiet, err := benchkit.WaitQuiet(ctx, quiet)
			if err != nil {
				return err
			}
			var r toolRun
			switch v.id {
			case "pgbench":
				r, err = b.pgbenchRun(ctx, p, users)
			case "driver", "driver-gomaxprocs":
				r, err = withProcs(v.gomaxprocs, func() (toolRun, error) { return b.replabRun(ctx, p, users, 1) })
			default:
				r, err = withProcs(v.gomaxprocs, func() (toolRun, error) { return b.pgxRun(ctx, p, users, v.id == "pgx-pipelined") })
			}
			if err != nil {
				return fmt.Errorf("%s, %d users: %w", v.id, users, err)
			}
			r.Tool, r.Quiet = v.id, quiet
			all = append(all, r)
			logf("      %-17s %d users: %8.0f tps, latency %.3f ms, client CPU %.1f µs/tx, server CPU %.1f µs/tx, machine busy %.0f%%, unrelated %.2f cores",
				v.id, users, r.TPS, r.LatencyMeanMs, r.ClientCPUUsPerTx, r.ServerCPUUsPerTx, 100*r.CPU.MachineBusy, r.UnrelatedCores)
		}
	}
	for _, r := range all {
		b.r.Add(Figure{
			Name: fmt.Sprintf("diag_%s_%dusers_client_cpu_us_per_tx", strings.ReplaceAll(r.Tool, "-", "_"), r.Users), Value: r.ClientCPUUsPerTx,
			Configured: map[string]any{"users": r.Users, "client_site": b.clientSite, "variant": r.Tool},
			Note:       variantNote(r.Tool), Details: map[string]any{"run": r, "idle_bench_process_cores": idle},
		})
	}
	return nil
}

func variantNote(id string) string {
	for _, v := range diagVariants {
		if v.id == id {
			return v.note
		}
	}
	return ""
}

// withProcs runs f with GOMAXPROCS set to n (-1: the number of CPUs; 0:
// unchanged) and restores it.
func withProcs(n int, f func() (toolRun, error)) (toolRun, error) {
	if n == -1 {
		n = runtime.NumCPU()
	}
	if n > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	}
	return f()
}

// idleCores is what this process uses over 2 s while nothing runs.
func idleCores(ctx context.Context) float64 {
	c0, t0 := benchkit.SelfCPU(), time.Now()
	if benchkit.Sleep(ctx, 2*time.Second) != nil {
		return 0
	}
	return benchkit.Round((benchkit.SelfCPU()-c0)/time.Since(t0).Seconds(), 3)
}

// pgxRun is the floor: users goroutines, each with its own pgx.Conn,
// running the transaction for compareSeconds with no database/sql and no
// driver bookkeeping.
func (b *bench) pgxRun(ctx context.Context, p *pgLab, users int, pipelined bool) (toolRun, error) {
	node, _ := p.node("db")
	site := p.lab.Site(b.clientSite)
	cfg, err := pgx.ParseConfig(node.DSN)
	if err != nil {
		return toolRun{}, err
	}
	cfg.DialFunc = site.DialContext
	conns := make([]*pgx.Conn, users)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	for i := range conns {
		if conns[i], err = pgx.ConnectConfig(ctx, cfg); err != nil {
			return toolRun{}, err
		}
		if _, err := conns[i].Prepare(ctx, "u", updateSQL); err != nil {
			return toolRun{}, err
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var count, latNs atomic.Int64
	var firstErr atomic.Pointer[error]
	srv0, meter, self0, t0 := nodeCPU(ctx, p.cluster, "db"), benchkit.StartCPU(), benchkit.SelfCPU(), time.Now()
	end := t0.Add(compareSeconds * time.Second)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(1, uint64(i)+1))
			for time.Now().Before(end) && rctx.Err() == nil {
				aid := 1 + r.Int64N(compareAccounts)
				s := time.Now()
				var err error
				if pipelined {
					batch := &pgx.Batch{}
					batch.Queue("begin")
					batch.Queue("u", aid)
					batch.Queue("commit")
					err = c.SendBatch(rctx, batch).Close()
				} else {
					if _, err = c.Exec(rctx, "begin"); err == nil {
						if _, err = c.Exec(rctx, "u", aid); err == nil {
							_, err = c.Exec(rctx, "commit")
						}
					}
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					cancel()
					return
				}
				count.Add(1)
				latNs.Add(int64(time.Since(s)))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0).Seconds()
	self, cpu, srv := benchkit.SelfCPU()-self0, meter.Read(), nodeCPU(ctx, p.cluster, "db")-srv0
	if e := firstErr.Load(); e != nil {
		return toolRun{}, *e
	}
	n := count.Load()
	r := toolRun{Users: users, TPS: benchkit.Round(float64(n)/wall, 1), Transactions: n, ClientCPUS: benchkit.Round(self, 3),
		ClientCPUUsPerTx: perTxUs(self, n), ServerCPUUsPerTx: perTxUs(srv, n), CPU: cpu, UnrelatedCores: unrelated(cpu, self, srv, wall)}
	if n > 0 {
		r.LatencyMeanMs = benchkit.Round(float64(latNs.Load())/float64(n)/1e6, 3)
	}
	return r, nil
}

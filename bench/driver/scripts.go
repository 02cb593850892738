package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/driver"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/script"
)

// The scripts step: pgbench's built-in scripts, run by pgbench (-b NAME
// -M prepared) and by replab's script workload from the same scripts
// written out as files, alternating, on the compare step's server and
// tables.
const (
	scriptsUsers   = 8
	scriptsSeconds = 10
	scriptsPairs   = 2
	scriptsDir     = "internal/workload/script/testdata" // from the repository's root, where make runs
)

var builtinScripts = []string{"tpcb-like", "simple-update", "select-only"}

// scriptTx is the script workload's transaction type for one built-in
// script at scale compareScale.
func scriptTx(name string) (workload.TxType, error) {
	s, err := spec.Parse("bench-scripts.toml", []byte(fmt.Sprintf(`[lab]
name = "bench-scripts"
`+compareSpec+`
[workload]
kind = "script"
schema = %q
transactions = [%q]
scale = %d
`, scriptsDir+"/pgbench/schema.sql", scriptsDir+"/builtin/"+name+".sql", compareScale)))
	if err != nil {
		return workload.TxType{}, err
	}
	w, err := workload.NewRegistry(script.Factory).For(s, "postgres")
	if err != nil {
		return workload.TxType{}, err
	}
	return w.Transactions()[0], nil
}

// scripts builds the lab, loads pgbench's tables and runs the pairs for
// each built-in script.
func (b *bench) scripts(ctx context.Context) error {
	p, err := upPostgres(ctx, "bench-scripts", compareSpec)
	if err != nil {
		return err
	}
	defer p.close()
	if err := b.loadPgbench(ctx, p, b.clientSite); err != nil {
		return err
	}
	db, err := p.node("db")
	if err != nil {
		return err
	}
	site := p.lab.Site(b.clientSite)
	for _, name := range builtinScripts {
		tx, err := scriptTx(name)
		if err != nil {
			return fmt.Errorf("script %s: %w", name, err)
		}
		var pg, rl []float64
		for i := 1; i <= scriptsPairs; i++ {
			for _, tool := range []string{"pgbench", "replab"} {
				if err := p.exec(ctx, "db", "VACUUM pgbench_accounts", "CHECKPOINT"); err != nil {
					return err
				}
				if _, err := benchkit.WaitQuiet(ctx, quiet); err != nil {
					return err
				}
				var tps float64
				if tool == "pgbench" {
					n := strconv.Itoa(scriptsUsers)
					res, err := pgbenchRun(ctx, b.pgbench, site, db.DSN, scriptsSeconds, "-n", "-b", name, "-M", "prepared", "-c", n, "-j", n, "-T", strconv.Itoa(scriptsSeconds))
					if err != nil {
						return fmt.Errorf("pgbench %s run %d: %w", name, i, err)
					}
					tps = res.TPS
					pg = append(pg, tps)
				} else {
					if tps, err = b.scriptRun(ctx, p, tx, int64(i)); err != nil {
						return fmt.Errorf("replab %s run %d: %w", name, i, err)
					}
					rl = append(rl, tps)
				}
				logf("      %-7s %-13s run %d: %8.0f tps", tool, name, i, tps)
			}
		}
		mean := func(v []float64) float64 {
			s := 0.0
			for _, x := range v {
				s += x
			}
			return s / float64(len(v))
		}
		cfg := map[string]any{
			"users": scriptsUsers, "client_site": b.clientSite, "scale": compareScale, "duration_s": scriptsSeconds,
			"pgbench": fmt.Sprintf("-n -b %s -M prepared -c %d -j %d -T %d", name, scriptsUsers, scriptsUsers, scriptsSeconds),
			"replab":  fmt.Sprintf("script workload, %s/builtin/%s.sql, driver.Run closed loop, %d users, pipelined (BEGIN, the statements and COMMIT in one write)", scriptsDir, name, scriptsUsers),
			"order":   "pgbench, replab ×2; VACUUM + CHECKPOINT before each run",
		}
		b.r.Add(Figure{Name: "script_" + name + "_vs_pgbench_ratio", Value: benchkit.Round(mean(rl)/mean(pg), 3), Configured: cfg,
			Target: ">= 1.0", TargetMin: benchkit.Ptr(1.0),
			Note:    "mean replab TPS / mean pgbench TPS on pgbench's built-in script; pgbench sends statement by statement, replab pipelines",
			Details: map[string]any{"pgbench_tps": pg, "replab_tps": rl}})
		b.r.Add(Figure{Name: "script_" + name + "_pgbench_tps", Value: benchkit.Round(mean(pg), 1), Configured: cfg,
			Note: "pgbench's own tps (without initial connection time), mean of the runs"})
		b.r.Add(Figure{Name: "script_" + name + "_replab_tps", Value: benchkit.Round(mean(rl), 1), Configured: cfg,
			Note: "driver.Result.TPS (measure phase), mean of the runs"})
	}
	return nil
}

func (b *bench) scriptRun(ctx context.Context, p *pgLab, tx workload.TxType, seed int64) (float64, error) {
	db, err := p.sql().Open(ctx, "db", b.clientSite)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(scriptsUsers + 2)
	cfg := p.driverConfig(driver.Config{Users: scriptsUsers, Duration: scriptsSeconds * time.Second, Seed: seed, MaxRetries: 3})
	res, err := driver.Run(ctx, cfg, []workload.TxType{tx}, driver.Sources(db))
	if err != nil {
		return 0, err
	}
	if !res.Complete || res.Errors > 0 {
		return 0, fmt.Errorf("driver: complete %t, %d errors: %s", res.Complete, res.Errors, res.StopReason)
	}
	return res.TPS, nil
}

package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"replab/bench/internal/benchkit"
	"replab/internal/clock"
	"replab/internal/driver"
	"replab/internal/history"
	"replab/internal/stats"
	"replab/internal/workload"
)

// What recording the history ([run] history) costs, measured as the lag
// probe's cost is (lagoverhead.go, its slices and lab): each run
// alternates 2 s slices with the history on and off — on, off, off, on,
// … — and compares the transactions committed in its on slices with its
// off slices. On is what replab run does: every attempt of every
// transaction written to a history.jsonl on disk, with the transaction's
// micro-operation (the account written) as the workload records it. Off
// records nothing: the driver hands the workload no recorder and writes
// nothing (driver.HistorySampler). The transaction is the lag step's,
// pipelined: the cheapest the driver sends, so recording weighs the most
// on it. No lag probe runs.
const historyReps = 12

// slicedHistory records into w outside the off slices (the warmup, the
// lead and tail, the on slices) and counts the attempts it takes per
// slice.
type slicedHistory struct {
	w        *history.Writer
	s        slicer
	recorded *[lagSlices]atomic.Int64
}

func (h slicedHistory) RecordAt(now int64) bool {
	k := h.s.at(now)
	if k < 0 {
		return true
	}
	if !h.s.on(k) {
		return false
	}
	h.recorded[k].Add(1)
	return true
}

func (h slicedHistory) Record(op history.Op) (int, error) { return h.w.Record(op) }

// recordingUpdateTx is the lag step's UPDATE by key, recording the
// account it writes as a micro-operation ["w", aid, value], value unique
// per user as the checking workloads make them.
func recordingUpdateTx() workload.TxType {
	tx := updateTx()
	var next [lagUsers]int64
	write := func(rec *workload.Recorder, user int, aid int64) {
		if rec.On() {
			next[user]++
			rec.Add(history.Write(aid, next[user]*lagUsers+int64(user)))
		}
	}
	tx.Batch = func(user int, r *rand.Rand, s *workload.Scratch) []workload.Call {
		aid := 1 + r.Int64N(compareAccounts)
		write(s.Rec, user, aid)
		return []workload.Call{{Stmt: "update", Args: []any{aid}, Rows: 1}}
	}
	tx.Run = func(ctx context.Context, t *workload.Tx, r *rand.Rand) (int64, error) {
		aid := 1 + r.Int64N(compareAccounts) // as updateTx's Run draws it
		write(t.Rec, t.User, aid)
		res, err := t.Exec(ctx, "update", aid)
		if err != nil {
			return 0, fmt.Errorf("update account %d: %w", aid, err)
		}
		return res.RowsAffected()
	}
	return tx
}

// historyRun is one run of the history's slices.
type historyRun struct {
	Rep            int           `json:"rep"`
	TPS            float64       `json:"tps"`
	Transactions   int64         `json:"transactions"`
	TPSOn          float64       `json:"tps_on"`
	TPSOff         float64       `json:"tps_off"`
	OverheadPct    float64       `json:"overhead_pct"`     // 1 − TPSOn / TPSOff
	CPUOverheadPct float64       `json:"cpu_overhead_pct"` // 1 − CPU per tx off / on
	BenchCPUOnUs   float64       `json:"bench_process_cpu_on_us_per_tx"`
	BenchCPUOffUs  float64       `json:"bench_process_cpu_off_us_per_tx"`
	RecordedPerSOn float64       `json:"recorded_per_s_on"`
	Operations     int64         `json:"operations"` // in history.jsonl
	BytesPerOp     float64       `json:"bytes_per_operation"`
	MachineBusy    float64       `json:"machine_busy_fraction"`
	Slices         []lagSliceRun `json:"slices"` // tracked: operations recorded
	Quiet          benchkit.QuietWait
}

// recordCost is what writing one operation costs this process: lagUsers
// goroutines record recordCostOps operations like the step's (two
// micro-operations' worth of text, ~165 bytes a line) through a
// history.Writer into a file, and the process's CPU is divided by them.
func recordCost() (usPerOp float64, err error) {
	const recordCostOps = 400_000
	dir, err := os.MkdirTemp("", "bench-history-cost-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	w, err := history.Create(filepath.Join(dir, history.FileName))
	if err != nil {
		return 0, err
	}
	cpu0 := benchkit.SelfCPU()
	var wg sync.WaitGroup
	for u := range lagUsers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rec workload.Recorder
			for i := range recordCostOps / lagUsers {
				rec.Reset()
				rec.Add(history.Write(int64(1+i%compareAccounts), int64(i*lagUsers+u)))
				now := clock.Now()
				_, _ = w.Record(history.Op{Process: u, Node: "db", Type: history.OK, F: history.FTxn, InvokeNs: now - 700_000, CompleteNs: now,
					TxnType: "update", Value: rec.Mops()})
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		return 0, err
	}
	return benchkit.Round((benchkit.SelfCPU()-cpu0)/recordCostOps*1e6, 3), nil
}

func (b *bench) historyOverhead(ctx context.Context) error {
	t := postgresLag
	t.lab = "bench-history"
	p, err := b.upLagLab(ctx, t)
	if err != nil {
		return err
	}
	defer p.close()
	if _, err := benchkit.WaitQuiet(ctx, quiet); err != nil {
		return err
	}
	costUs, err := recordCost()
	if err != nil {
		return err
	}
	logf("      recording one operation costs this process %.3f µs of CPU (history.Writer into a file, %d writers)", costUs, lagUsers)
	var runs []historyRun
	for rep := range historyReps {
		r, err := b.historyRun(ctx, p, t, rep+1)
		if err != nil {
			return fmt.Errorf("run %d: %w", rep+1, err)
		}
		runs = append(runs, r)
		logf("      run %2d: %5.0f tps on, %5.0f off: %+6.2f %%; this process's CPU µs/tx on/off %.1f/%.1f (%+.2f %% of all CPU); %.0f recorded/s on, %.0f bytes each; machine busy %.0f%%",
			rep+1, r.TPSOn, r.TPSOff, r.OverheadPct, r.BenchCPUOnUs, r.BenchCPUOffUs, r.CPUOverheadPct, r.RecordedPerSOn, r.BytesPerOp, 100*r.MachineBusy)
	}
	b.addHistory(t, runs, costUs)
	return nil
}

func (b *bench) historyRun(ctx context.Context, p *pgLab, t lagTarget, rep int) (historyRun, error) {
	run := historyRun{Rep: rep}
	if err := p.exec(ctx, "db", t.prep...); err != nil {
		return run, err
	}
	if err := p.cluster.WaitFlowing(ctx); err != nil {
		return run, err
	}
	dir, err := os.MkdirTemp("", "bench-history-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	w, err := history.Create(filepath.Join(dir, history.FileName))
	if err != nil {
		return run, err
	}
	defer w.Close()
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return run, err
	}
	defer db.Close()
	db.SetMaxOpenConns(lagUsers + 2)
	cfg := p.driverConfig(driver.Config{Users: lagUsers, Warmup: lagWarmup, Duration: lagMeasure, Seed: int64(rep), MaxRetries: 3,
		NodeOf: func(*sql.DB) string { return "db" }})
	var recorded [lagSlices]atomic.Int64
	out, err := b.slicedRun(ctx, sliced{p: p, db: db, cfg: cfg, tx: recordingUpdateTx(), flip: rep%2 == 0, counted: &recorded,
		install: func(sl slicer, cfg *driver.Config) { cfg.History = slicedHistory{w: w, s: sl, recorded: &recorded} }})
	run.Quiet = out.quiet
	if err != nil {
		return run, err
	}
	if err := w.Close(); err != nil {
		return run, err
	}
	on, off := out.on, out.off
	run.Slices, run.MachineBusy = out.slices, out.busy
	run.TPS, run.Transactions = benchkit.Round(out.res.TPS, 1), out.res.Transactions
	run.TPSOn, run.TPSOff = benchkit.Round(float64(on.Commits)/on.Seconds, 1), benchkit.Round(float64(off.Commits)/off.Seconds, 1)
	run.OverheadPct = benchkit.Round(100*(1-run.TPSOn/run.TPSOff), 2)
	run.BenchCPUOnUs, run.BenchCPUOffUs = perTxUs(on.BenchCPUS, on.Commits), perTxUs(off.BenchCPUS, off.Commits)
	cpuOn := perTxUs(on.BenchCPUS+on.PrimaryCPUS+on.StandbyCPUS, on.Commits)
	cpuOff := perTxUs(off.BenchCPUS+off.PrimaryCPUS+off.StandbyCPUS, off.Commits)
	run.CPUOverheadPct = benchkit.Round(100*(1-cpuOff/cpuOn), 2)
	run.RecordedPerSOn = benchkit.Round(float64(on.Tracked)/on.Seconds, 1)
	if h := out.res.History; h != nil {
		run.Operations = h.Operations
	}
	if fi, err := os.Stat(filepath.Join(dir, history.FileName)); err == nil && run.Operations > 0 {
		run.BytesPerOp = benchkit.Round(float64(fi.Size())/float64(run.Operations), 1)
	}
	return run, nil
}

func (b *bench) addHistory(t lagTarget, runs []historyRun, costUs float64) {
	var pct, cpu, on, off, rec, bytes, benchOn, benchOff []float64
	for _, r := range runs {
		pct = append(pct, r.OverheadPct)
		cpu = append(cpu, r.CPUOverheadPct)
		on, off = append(on, r.TPSOn), append(off, r.TPSOff)
		rec, bytes = append(rec, r.RecordedPerSOn), append(bytes, r.BytesPerOp)
		benchOn, benchOff = append(benchOn, r.BenchCPUOnUs), append(benchOff, r.BenchCPUOffUs)
	}
	s, c := spreadOf(pct, 2), spreadOf(cpu, 2)
	ci := benchkit.Round(stats.MeanCI(pct, 0.95).HalfWidth, 2)
	logf("      history: %.2f %% ± %.2f (95 %% CI) of throughput, %.2f %% of CPU per transaction", s.Mean, ci, c.Mean)
	cfg := map[string]any{
		"users": lagUsers, "link": fmt.Sprintf("db <-> sb, %s each way, 1gbit", lagDelay), "client_site": "db", "scheme": t.scheme,
		"transaction": t.txText + ", recording [\"w\", aid, unique value]",
		"warmup_s":    lagWarmup.Seconds(), "measure_s": lagMeasure.Seconds(), "repetitions": historyReps,
		"slices": fmt.Sprintf("%d of %s from %s into the measure phase: on, off, off, on, … in odd runs, off, on, on, off, … in even ones", lagSlices, lagSlice, lagLead),
		"on":     "every attempt written to a history.jsonl in a temporary directory (history.Writer, as replab run); off: no recorder handed to the workload, nothing written (driver.HistorySampler)",
		"order":  "the lag step's lab (no lag probe); VACUUM and CHECKPOINT, replica caught up, before each run",
	}
	cores := float64(runtime.NumCPU())
	perS := spreadOf(rec, 1).Mean
	modelPct := benchkit.Round(perS*costUs/(cores*1e6)*100, 3)
	b.r.Add(Figure{
		Name: "history_overhead_model_pct", Value: modelPct, Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("CPU recording takes, as a share of the %.0f cores: %.0f operations recorded a second in the on slices × %.3f µs of this process's CPU per operation (%d writers recording 400,000 operations like the step's through a history.Writer into a file, before the runs); leaves out interference (caches, scheduling) and the disk's own work",
			cores, perS, costUs, lagUsers),
		Details: map[string]any{"cpu_per_operation_us": costUs, "recorded_per_s": perS, "cores": cores},
	})
	b.r.Add(Figure{
		Name: "history_overhead_pct", Value: s.Mean, Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("mean over %d runs of 1 − TPS in the run's on slices / TPS in its off slices, in %%: %.2f ± %.2f (sd, 95%% CI ± %.2f), from %.2f to %.2f; from CPU per transaction (this process + primary + replica, on vs off slices) %.2f ± %.2f (sd); this process %.1f µs/tx on, %.1f off; %.0f operations recorded a second in the on slices, %.0f bytes each",
			len(pct), s.Mean, s.SD, ci, s.Min, s.Max, c.Mean, c.SD, spreadOf(benchOn, 1).Mean, spreadOf(benchOff, 1).Mean, spreadOf(rec, 0).Mean, spreadOf(bytes, 0).Mean),
		Details: map[string]any{"per_run_pct": pct, "per_run": s, "ci95_half_width": ci, "cpu_per_run_pct": cpu, "cpu_estimate": c,
			"tps_on": spreadOf(on, 1), "tps_off": spreadOf(off, 1), "recorded_per_s_on": spreadOf(rec, 1), "bytes_per_operation": spreadOf(bytes, 1),
			"bench_process_cpu_on_us_per_tx": spreadOf(benchOn, 1), "bench_process_cpu_off_us_per_tx": spreadOf(benchOff, 1), "runs": runs},
	})
}

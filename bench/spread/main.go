// Command spread measures how far replab's figures move from run to run of
// one fixed spec on this machine — a PostgreSQL primary and a standby 20
// ms away under the personnel workload, `replab run` five times — as the
// coefficient of variation of TPM and of the standby's lag p50 (target ≤ 5
// %), and then the same five runs with a CPU hog beside them (two busy
// loops, one per core): either the figures hold within 10 % of the quiet
// runs' means, or every starved run says it was machine-bound. A starved
// run that looks clean is the failure this guards against. Figures, not
// pass/fail. Needs root and PostgreSQL.
//
//	go run ./bench/spread --out bench/results/spread.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/lab"
	"replab/internal/stats"
)

// Environment describes the machine and the code a run measured.
type Environment struct {
	benchkit.Machine
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

// Report is spread.json.
type Report = benchkit.Report[Environment]

const runs = 5

// spreadSpec is the fixed spec: small, CPU-bound on this machine, with a
// standby far enough that lag is the link's and the replay's.
const spreadSpec = `
[lab]
name = "bench-spread"

[site.primary]
[site.standby]

[[link]]
sites = ["primary", "standby"]
delay = "10ms"
rate = "1gbit"

[engine]
kind = "postgres"

[node.p1]
site = "primary"
role = "primary"

[node.s1]
site = "standby"
role = "standby"
from = "p1"

[scheme]
replication = "async"

[workload]
kind = "personnel"
persons = 2000

[run]
users = 4
warmup = "3s"
duration = "15s"
cooldown = "0s"
`

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func main() {
	out := flag.String("out", "bench/results/spread.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	flag.Parse()
	b := &bench{}
	if *list {
		benchkit.PrintSteps(b.steps(), 8)
		return
	}
	os.Exit(b.run(*out, *only))
}

type bench struct {
	r     *Report
	dir   string
	bin   string
	quiet []runFigures // the quiet step's runs, for the hog step's comparison
}

func (b *bench) steps() []benchkit.Step {
	return []benchkit.Step{
		{ID: "quiet", Title: fmt.Sprintf("one spec (PostgreSQL primary + standby 10 ms away, personnel, 4 users, 15 s), replab run ×%d", runs),
			Limit: 10 * time.Minute, Run: b.quietRuns},
		{ID: "hog", Title: fmt.Sprintf("the same ×%d beside two busy loops (one per core)", runs),
			Limit: 10 * time.Minute, Run: b.hogRuns},
	}
}

func (b *bench) run(out, only string) int {
	if err := lab.Preflight(); err != nil {
		logf("spread: %v", err)
		return 2
	}
	ctx, stop := benchkit.SignalContext("spread", logf)
	defer stop()
	start := time.Now()
	b.r = &Report{Environment: Environment{Machine: benchkit.CaptureMachine(ctx, start), LoadAvgStart: benchkit.ReadTrim("/proc/loadavg")}}
	steps, err := benchkit.SelectSteps(b.steps(), only, []string{"quiet", "hog"})
	if err != nil {
		logf("spread: %v", err)
		return 2
	}
	if b.dir, err = os.MkdirTemp("", "bench-spread-*"); err != nil {
		logf("spread: %v", err)
		return 1
	}
	defer os.RemoveAll(b.dir)
	b.bin = filepath.Join(b.dir, "replab")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "./cmd/replab").CombinedOutput(); err != nil {
		logf("spread: go build ./cmd/replab (run from the repository's top): %v\n%s", err, out)
		return 1
	}
	if err := os.WriteFile(filepath.Join(b.dir, "spread.toml"), []byte(spreadSpec), 0o644); err != nil {
		logf("spread: %v", err)
		return 1
	}
	benchkit.RunSteps(ctx, b.r, steps, benchkit.StartCPU, logf)
	return benchkit.Finish(ctx, b.r, "spread", out, start, func(e *Environment) {
		e.LoadAvgEnd = benchkit.ReadTrim("/proc/loadavg")
		e.GOMAXPROCS = runtime.GOMAXPROCS(0)
	}, func(w io.Writer) {
		b.r.WriteSummary(w, benchkit.Summary{ConfiguredKeys: []string{"runs", "beside"}, IDWidth: 8})
	}, logf)
}

// runFigures is what one run's summary.json says.
type runFigures struct {
	TPM          float64 `json:"tpm"`
	LagP50Ms     float64 `json:"lag_p50_ms"`
	MachineBound bool    `json:"machine_bound"`
	BusyMeanPct  float64 `json:"machine_busy_mean_pct"`
	OtherCores   float64 `json:"other_cores"`
	Why          string  `json:"why,omitempty"`
}

// replabRun runs the spec once with the replab binary and reads its summary.
func (b *bench) replabRun(ctx context.Context, name string) (runFigures, error) {
	out := filepath.Join(b.dir, name)
	cmd := exec.CommandContext(ctx, b.bin, "run", filepath.Join(b.dir, "spread.toml"), "--out", out)
	if o, err := cmd.CombinedOutput(); err != nil {
		return runFigures{}, fmt.Errorf("replab run: %v: %s", err, o)
	}
	raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		return runFigures{}, err
	}
	var s struct {
		TPM          float64 `json:"tpm"`
		MachineBound bool    `json:"machine_bound"`
		Machine      *struct {
			BusyMeanPct float64 `json:"busy_mean_pct"`
			OtherCores  float64 `json:"other_cores"`
			Why         string  `json:"why"`
		} `json:"machine"`
		Replicas map[string]struct {
			LagMs struct {
				P50 float64 `json:"p50"`
			} `json:"lag_ms"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return runFigures{}, err
	}
	f := runFigures{TPM: s.TPM, LagP50Ms: s.Replicas["s1"].LagMs.P50, MachineBound: s.MachineBound}
	if s.Machine != nil {
		f.BusyMeanPct, f.OtherCores, f.Why = s.Machine.BusyMeanPct, s.Machine.OtherCores, s.Machine.Why
	}
	return f, nil
}

func (b *bench) series(ctx context.Context, label string) ([]runFigures, error) {
	var fs []runFigures
	for i := 1; i <= runs; i++ {
		f, err := b.replabRun(ctx, fmt.Sprintf("%s-%d", label, i))
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i, err)
		}
		logf("      %s run %d: %.0f tpm, lag p50 %.2f ms, machine busy %.0f %% (other work %.2f cores), machine-bound %v",
			label, i, f.TPM, f.LagP50Ms, f.BusyMeanPct, f.OtherCores, f.MachineBound)
		fs = append(fs, f)
	}
	return fs, nil
}

// cov is the coefficient of variation in %, and the mean.
func cov(xs []float64) (pct, mean float64) {
	ci := stats.MeanCI(xs, 0.95)
	if ci.Mean == 0 {
		return math.NaN(), 0
	}
	return 100 * ci.StdDev / ci.Mean, ci.Mean
}

func (b *bench) quietRuns(ctx context.Context) error {
	fs, err := b.series(ctx, "quiet")
	if err != nil {
		return err
	}
	b.quiet = fs
	var tpm, lag []float64
	bound := 0
	for _, f := range fs {
		tpm, lag = append(tpm, f.TPM), append(lag, f.LagP50Ms)
		if f.MachineBound {
			bound++
		}
	}
	cfg := map[string]any{"runs": runs, "beside": "nothing", "spec": "PostgreSQL primary + standby 10 ms away (1 Gbit/s), personnel, 4 users, 3 s warmup + 15 s measured"}
	tc, tm := cov(tpm)
	lc, lm := cov(lag)
	b.r.Add(benchkit.Figure{Name: "tpm_cov_pct", Value: benchkit.Round(tc, 2), Configured: cfg, Target: "<= 5 %", TargetMax: benchkit.Ptr(5.0),
		Note:    fmt.Sprintf("coefficient of variation (sd / mean) of TPM over %d runs of the spec, mean %.0f tpm; %d of them machine-bound", runs, tm, bound),
		Details: map[string]any{"runs": fs}})
	b.r.Add(benchkit.Figure{Name: "lag_p50_cov_pct", Value: benchkit.Round(lc, 2), Configured: cfg, Target: "<= 5 %", TargetMax: benchkit.Ptr(5.0),
		Note: fmt.Sprintf("coefficient of variation of the standby's lag p50 over the same runs, mean %.2f ms", lm)})
	return nil
}

// hog starts one busy loop per core, as separate processes (a neighbour on
// the machine, not a goroutine of ours), and returns their stop.
func hog(ctx context.Context) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	}
	for range runtime.NumCPU() {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}

func (b *bench) hogRuns(ctx context.Context) error {
	stop, err := hog(ctx)
	if err != nil {
		return err
	}
	fs, err := b.series(ctx, "hog")
	stop()
	if err != nil {
		return err
	}
	var qt, ql []float64
	for _, f := range b.quiet {
		qt, ql = append(qt, f.TPM), append(ql, f.LagP50Ms)
	}
	_, qtm := cov(qt)
	_, qlm := cov(ql)
	held, bound, clean := 0, 0, 0
	for _, f := range fs {
		within := len(b.quiet) > 0 && math.Abs(f.TPM/qtm-1) <= 0.1 && math.Abs(f.LagP50Ms/qlm-1) <= 0.1
		switch {
		case within:
			held++
		case f.MachineBound:
			bound++
		default:
			clean++ // starved, and not said: what must not happen
		}
	}
	verdict := fmt.Sprintf("%d of %d runs held within 10 %% of the quiet runs' means, %d were marked machine-bound, %d were neither", held, runs, bound, clean)
	logf("      %s", verdict)
	cfg := map[string]any{"runs": runs, "beside": fmt.Sprintf("%d busy loops (sh -c 'while :; do :; done'), one per core", runtime.NumCPU())}
	b.r.Add(benchkit.Figure{Name: "hog_unflagged_runs", Value: float64(clean), Configured: cfg,
		Target: "0: every run beside the hog holds within 10 % or is marked machine-bound", TargetMax: benchkit.Ptr(0.0),
		Note: verdict, Details: map[string]any{"runs": fs, "quiet_tpm_mean": qtm, "quiet_lag_p50_mean_ms": qlm}})
	return nil
}

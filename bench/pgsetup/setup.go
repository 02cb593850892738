package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/engine/postgres"
	"replab/internal/spec"
)

// linkConf is one kind of link between the primary's site and each
// standby's site.
type linkConf struct {
	id       string
	delay    string // one way
	rate     string
	queue    string // "" = the default (one BDP)
	delayMs  float64
	rateBps  float64
	reps     int
	headline bool // the configuration: its figures carry the target
}

// The link (80 ms round trip, 100 Mbit/s), then two that take one
// cause away each: the same round trip at 1 Gbit/s (transfer time nearly
// gone: what remains is round trips and slow start), and 100 Mbit/s
// without delay (round trips gone: what remains is the transfer).
var linkConfs = []linkConf{
	{id: "wan-100mbit", delay: "40ms", rate: "100mbit", delayMs: 40, rateBps: 100e6, reps: 3, headline: true},
	{id: "wan-1gbit", delay: "40ms", rate: "1gbit", delayMs: 40, rateBps: 1e9, reps: 3},
	{id: "lan-100mbit", delay: "0ms", rate: "100mbit", queue: "1MB", delayMs: 0, rateBps: 100e6, reps: 3},
}

// standbys are the standby nodes, each in its own site.
var standbys = []string{"s1", "s2"}

// targetBaseS is the allowance on top of the transfer time.
const targetBaseS = 3.0

func (lc linkConf) spec() string {
	link := fmt.Sprintf("delay = %q\nrate = %q\n", lc.delay, lc.rate)
	if lc.queue != "" {
		link += fmt.Sprintf("queue = %q\n", lc.queue)
	}
	s := "[site.db]\n"
	for _, sb := range standbys {
		s += fmt.Sprintf("[site.%s]\n", sb)
	}
	for _, sb := range standbys {
		s += fmt.Sprintf("[[link]]\nsites = [\"db\", %q]\n%s", sb, link)
	}
	s += "\n[engine]\nkind = \"postgres\"\n\n[node.db]\nsite = \"db\"\nrole = \"primary\"\n"
	for _, sb := range standbys {
		s += fmt.Sprintf("[node.%s]\nsite = %q\nrole = \"standby\"\nfrom = \"db\"\n", sb, sb)
	}
	return s
}

func (lc linkConf) describe() string {
	return fmt.Sprintf("%s each way, %s", lc.delay, lc.rate)
}

// standbyRun is one standby's part of a setup.
type standbyRun struct {
	Node string `json:"node"`
	// StartedAtS is when its base backup began (since Up started).
	StartedAtS float64 `json:"started_at_s"`
	// BasebackupS is the engine's own figure: pg_basebackup across the
	// link plus writing the standby's configuration.
	BasebackupS float64 `json:"basebackup_s"`
	// DataDirBytes is the copy's size on disk (pg_wal holds whole 16 MiB
	// segments, so it can exceed what crossed the link).
	DataDirBytes int64 `json:"data_dir_bytes"`
	// TransferAtRateS is LinkBytes × 8 / rate.
	TransferAtRateS float64 `json:"transfer_s_at_rate"`
	// StandbyStartS is the standby's start until it accepted connections.
	StandbyStartS float64 `json:"standby_start_s"`
	// LinkBytesAfter is what its link delivered from the end of its base
	// backup until Up returned: streaming, including WAL a later backup
	// made the primary write.
	LinkBytesAfter uint64 `json:"link_bytes_after_backup"`
	end            float64
	transfer
}

// setupRun is one measured setup.
type setupRun struct {
	Rep int `json:"rep"`
	// SetupS is the engine's Up: from its start until it returned, i.e.
	// every node running and a marker written at the primary visible at
	// every standby.
	SetupS float64 `json:"setup_s"`
	// PrimaryS is Up's start until the primary accepted connections with
	// the replab database and marker table created (initdb included).
	PrimaryS float64      `json:"primary_start_s"`
	Standbys []standbyRun `json:"standbys"`
	// FlowingS is the last standby's start until Up returned (the
	// marker's trip).
	FlowingS float64 `json:"flowing_s"`
	// OtherS is the rest: between the events above (dropping and
	// creating slots, directories).
	OtherS          float64            `json:"other_s"`
	BasebackupBytes uint64             `json:"basebackup_bytes"` // over both links
	TransferAtRateS float64            `json:"transfer_s_at_rate"`
	TargetS         float64            `json:"target_s"`
	LabUpS          float64            `json:"lab_up_s"` // not part of setup_s
	Events          []event            `json:"events"`
	Quiet           benchkit.QuietWait `json:"wait_for_quiet_machine"`
	CPU             benchkit.CPUUse    `json:"cpu"`
}

var (
	rePrimary   = regexp.MustCompile(`^node (\S+): primary .* started in `)
	reBackupBeg = regexp.MustCompile(`^node (\S+): base backup from `)
	reStreaming = regexp.MustCompile(`^node (\S+): standby of \S+ streaming \(base backup ([0-9.]+) MB in ([0-9.]+) s, ready after ([0-9.]+) s\)`)
)

// setupOnce builds a fresh lab, times the engine's Up in it, and tears
// everything down again.
func (b *bench) setupOnce(ctx context.Context, lc linkConf, rep int) (run setupRun, err error) {
	run.Rep = rep
	name := "bench-pgsetup"
	s, err := spec.Parse(name+".toml", []byte(fmt.Sprintf("[lab]\nname = %q\n%s", name, lc.spec())))
	if err != nil {
		return run, fmt.Errorf("spec: %w", err)
	}
	if err := (postgres.Engine{}).Validate(s); err != nil {
		return run, fmt.Errorf("spec: %w", err)
	}
	t0 := time.Now()
	l, err := benchkit.StartLab(ctx, s, logf)
	if err != nil {
		return run, fmt.Errorf("start lab: %w", err)
	}
	defer closeLab(l)
	run.LabUpS = benchkit.Round(time.Since(t0).Seconds(), 3)
	if run.Quiet, err = benchkit.WaitQuiet(ctx, quiet); err != nil {
		return run, err
	}

	var dirs []string
	for _, sb := range standbys {
		dirs = append(dirs, "db->"+sb)
	}
	tl := newTimeline(l.Emulator(), os.Stderr, dirs...)
	ectx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	meter := benchkit.StartCPU()
	tl.begin()
	c, err := postgres.Engine{}.Up(ectx, l, tl)
	run.SetupS = benchkit.Round(time.Since(tl.start).Seconds(), 3)
	tl.end()
	run.CPU = meter.Read()
	if err != nil {
		return run, fmt.Errorf("engine up: %w", err)
	}
	if cerr := c.Close(); cerr != nil {
		logf("      warning: stop PostgreSQL: %v", cerr)
	}
	run.Events = tl.events

	// The engine's progress lines date each phase.
	begun := map[string]float64{}
	last := 0.0
	accounted := 0.0
	for _, ev := range tl.events {
		switch {
		case rePrimary.MatchString(ev.Line):
			run.PrimaryS = benchkit.Round(ev.T, 3)
			accounted += ev.T
		case reBackupBeg.MatchString(ev.Line):
			begun[reBackupBeg.FindStringSubmatch(ev.Line)[1]] = ev.T
		case reStreaming.MatchString(ev.Line):
			m := reStreaming.FindStringSubmatch(ev.Line)
			node := m[1]
			mb, _ := strconv.ParseFloat(m[2], 64)
			backup, _ := strconv.ParseFloat(m[3], 64)
			ready, _ := strconv.ParseFloat(m[4], 64)
			from, ok := begun[node]
			if !ok {
				return run, fmt.Errorf("no base backup start line for %s", node)
			}
			i := slices.Index(standbys, node)
			if i < 0 {
				return run, fmt.Errorf("unknown standby %s", node)
			}
			// The engine times from just before its first line: its end is
			// start + backup, within a millisecond.
			sr := standbyRun{Node: node, StartedAtS: benchkit.Round(from, 3), BasebackupS: backup, DataDirBytes: int64(math.Round(mb * 1e6)),
				StandbyStartS: benchkit.Round(ready-backup, 3), transfer: tl.transfer(i, from, from+backup, lc.rateBps)}
			sr.TransferAtRateS = benchkit.Round(float64(sr.LinkBytes)*8/lc.rateBps, 3)
			sr.end = from + backup
			run.Standbys = append(run.Standbys, sr)
			run.BasebackupBytes += sr.LinkBytes
			accounted += ready
			last = ev.T
		}
	}
	if len(run.Standbys) != len(standbys) {
		return run, fmt.Errorf("the engine reported %d standbys streaming, want %d", len(run.Standbys), len(standbys))
	}
	for k := range run.Standbys {
		sr := &run.Standbys[k]
		i := slices.Index(standbys, sr.Node)
		b0, _ := tl.bytesAt(i, sr.end)
		b1, _ := tl.bytesAt(i, run.SetupS+1)
		sr.LinkBytesAfter = b1 - b0
	}
	run.FlowingS = benchkit.Round(run.SetupS-last, 3)
	run.OtherS = benchkit.Round(run.SetupS-accounted-run.FlowingS, 3)
	run.TransferAtRateS = benchkit.Round(float64(run.BasebackupBytes)*8/lc.rateBps, 3)
	run.TargetS = benchkit.Round(targetBaseS+run.TransferAtRateS, 3)
	return run, nil
}

// setups runs one link configuration's repetitions and adds its figures.
func (b *bench) setups(ctx context.Context, lc linkConf) error {
	var runs []setupRun
	for rep := 1; rep <= lc.reps; rep++ {
		r, err := b.setupOnce(ctx, lc, rep)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", rep, err)
		}
		runs = append(runs, r)
		line := fmt.Sprintf("      run %d: setup %.2f s (target %.2f): primary %.2f s", rep, r.SetupS, r.TargetS, r.PrimaryS)
		for _, s := range r.Standbys {
			line += fmt.Sprintf("; %s backup %.2f s for %.1f MB (at rate %.2f s; first data after %.2f s, ramp %.2f s, bulk %.1f Mbit/s, tail %.2f s), start %.2f s",
				s.Node, s.BasebackupS, float64(s.LinkBytes)/1e6, s.TransferAtRateS, s.FirstDataS, s.RampS, s.BulkMbps, s.TailS, s.StandbyStartS)
		}
		line += fmt.Sprintf("; flowing %.2f s", r.FlowingS)
		for _, s := range r.Standbys {
			line += fmt.Sprintf("; %s link after its backup %.1f MB", s.Node, float64(s.LinkBytesAfter)/1e6)
		}
		logf("%s", line)
	}
	b.addSetup(lc, runs)
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// col collects one number from every run (or every standby of every run).
func col(runs []setupRun, f func(setupRun) float64) []float64 {
	var out []float64
	for _, r := range runs {
		out = append(out, f(r))
	}
	return out
}

func colStandby(runs []setupRun, f func(standbyRun) float64) []float64 {
	var out []float64
	for _, r := range runs {
		for _, s := range r.Standbys {
			out = append(out, f(s))
		}
	}
	return out
}

func (b *bench) addSetup(lc linkConf, runs []setupRun) {
	cfg := map[string]any{
		"link": lc.describe(), "rtt_ms": 2 * lc.delayMs, "rate_mbit": lc.rateBps / 1e6, "queue": "1 BDP (default)",
		"standbys": len(standbys), "repetitions": lc.reps, "scheme": "async physical streaming; standbys copied one after the other by pg_basebackup -X stream -c fast run in their own sites",
		"topology": "db <-> s1 and db <-> s2, one link each",
	}
	if lc.queue != "" {
		cfg["queue"] = lc.queue
	}
	setup := median(col(runs, func(r setupRun) float64 { return r.SetupS }))
	bytesMed := median(col(runs, func(r setupRun) float64 { return float64(r.BasebackupBytes) }))
	transfer := benchkit.Round(bytesMed*8/lc.rateBps, 3)
	target := benchkit.Round(targetBaseS+transfer, 3)
	primary := median(col(runs, func(r setupRun) float64 { return r.PrimaryS }))
	backup := median(colStandby(runs, func(s standbyRun) float64 { return s.BasebackupS }))
	backupAtRate := median(colStandby(runs, func(s standbyRun) float64 { return s.TransferAtRateS }))
	start := median(colStandby(runs, func(s standbyRun) float64 { return s.StandbyStartS }))
	flowing := median(col(runs, func(r setupRun) float64 { return r.FlowingS }))
	firstData := median(colStandby(runs, func(s standbyRun) float64 { return s.FirstDataS }))
	ramp := median(colStandby(runs, func(s standbyRun) float64 { return s.RampS }))
	bulk := median(colStandby(runs, func(s standbyRun) float64 { return s.BulkMbps }))
	tail := median(colStandby(runs, func(s standbyRun) float64 { return s.TailS }))
	breakdown := map[string]any{
		"primary_start_s": primary, "basebackup_s_each": backup, "basebackup_transfer_s_at_rate_each": backupAtRate,
		"standby_start_s_each": start, "flowing_s": flowing,
		"basebackup_first_data_s": firstData, "basebackup_ramp_s": ramp, "basebackup_bulk_mbps": bulk, "basebackup_tail_s": tail,
		"transfer_s_if_backups_ran_in_parallel": benchkit.Round(bytesMed/float64(len(standbys))*8/lc.rateBps, 3),
	}
	suffix := ""
	if !lc.headline {
		suffix = "_" + strings.ReplaceAll(lc.id, "-", "_")
	}
	b.r.Add(Figure{
		Name: "setup" + suffix + "_s", Value: benchkit.Round(setup, 3), Configured: cfg,
		Target: fmt.Sprintf("<= %.2f s: %.0f s plus the base backups' transfer time at the link rate", target, targetBaseS), TargetMax: benchkit.Ptr(target),
		Note: "median over fresh labs of postgres.Engine.Up: start until every node runs and a marker from the primary is visible at both standbys " +
			"(medians of the parts do not add up exactly)",
		Details: map[string]any{"breakdown_medians": breakdown, "runs": runs},
	})
	if !lc.headline {
		b.r.Add(Figure{Name: "basebackup" + suffix + "_s", Value: benchkit.Round(backup, 3), Configured: cfg,
			Note: fmt.Sprintf("one base backup (median over standbys and runs); at the link rate it would take %.3f s", backupAtRate)})
		return
	}
	b.r.Add(Figure{Name: "basebackup_bytes", Value: bytesMed, Configured: cfg,
		Note: "IP bytes the links delivered to the standbys during their base backups (both backups; median over runs), from the emulator's counters"})
	b.r.Add(Figure{Name: "transfer_s_at_rate", Value: transfer, Configured: cfg,
		Note: "basebackup_bytes × 8 / rate: both backups, which replab runs one after the other"})
	b.r.Add(Figure{Name: "target_s", Value: target, Configured: cfg,
		Note: fmt.Sprintf("%.0f s + transfer_s_at_rate", targetBaseS)})
	b.r.Add(Figure{Name: "primary_start_s", Value: primary, Configured: cfg,
		Note: "Up's start until the primary accepts connections with the replab database and marker table (initdb, configuration, start)"})
	b.r.Add(Figure{Name: "basebackup_s", Value: backup, Configured: cfg,
		Note: fmt.Sprintf("one standby's pg_basebackup across its link plus its configuration (median over standbys and runs); at the link rate alone %.3f s", backupAtRate)})
	b.r.Add(Figure{Name: "basebackup_overhead_s", Value: benchkit.Round(backup-backupAtRate, 3), Configured: cfg,
		Note: fmt.Sprintf("basebackup_s minus its transfer time at the rate: round trips before data flows (first data after %.2f s), slow start (%.2f s to reach 90 %% of the rate) and the tail (%.2f s)", firstData, ramp, tail)})
	b.r.Add(Figure{Name: "standby_start_s", Value: start, Configured: cfg,
		Note: "a standby's postgres start until it accepts connections (median over standbys and runs)"})
	b.r.Add(Figure{Name: "flowing_s", Value: flowing, Configured: cfg,
		Note: "the last standby's start until Up returned: the marker written at the primary becoming visible at both standbys"})
}

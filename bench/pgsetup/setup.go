package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/engine/postgres"
)

// standbyRun is one standby's part of a setup.
type standbyRun struct {
	Node string      `json:"node"`
	Link standbyLink `json:"link"`
	// StartedAtS is when its base backup began (since Up started).
	StartedAtS float64 `json:"started_at_s"`
	// BasebackupS is the engine's own figure: pg_basebackup across the
	// link plus writing the standby's configuration.
	BasebackupS float64 `json:"basebackup_s"`
	// CopyBytes is the copy's size on disk as the engine reports it: the
	// backup's bytes (pg_wal holds whole segments, so it can exceed what
	// crossed the link; compression makes the link carry less).
	CopyBytes int64 `json:"copy_bytes"`
	// CopyAtRateS is CopyBytes × 8 / the link's rate: this backup's ideal.
	CopyAtRateS float64 `json:"copy_s_at_rate"`
	// LinkAtRateS is LinkBytes × 8 / the link's rate.
	LinkAtRateS float64 `json:"link_s_at_rate"`
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
	// ReadyS is what `replab lab up` takes: the lab's start (sites,
	// links) plus the engine's Up.
	ReadyS float64 `json:"ready_s"`
	LabUpS float64 `json:"lab_up_s"`
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
	OtherS float64 `json:"other_s"`
	// IdealS is the slowest backup's bytes at its link's rate (Slowest
	// names it); TargetS is targetFactor × (targetBaseS + IdealS); Ratio is
	// ReadyS / TargetS (≤ 1 meets the target).
	IdealS  float64 `json:"ideal_s"`
	Slowest string  `json:"slowest"`
	TargetS float64 `json:"target_s"`
	Ratio   float64 `json:"ready_to_target"`
	// The same with the bytes that crossed the link instead of the
	// copy's size (stricter once the copy is compressed).
	IdealLinkS  float64            `json:"ideal_link_bytes_s"`
	TargetLinkS float64            `json:"target_link_bytes_s"`
	RatioLink   float64            `json:"ready_to_target_link_bytes"`
	Events      []event            `json:"events"`
	Quiet       benchkit.QuietWait `json:"wait_for_quiet_machine"`
	CPU         benchkit.CPUUse    `json:"cpu"`
}

var (
	rePrimary   = regexp.MustCompile(`^node (\S+): primary .* started in `)
	reBackupBeg = regexp.MustCompile(`^node (\S+): base backup from `)
	reStreaming = regexp.MustCompile(`^node (\S+): standby of \S+ streaming \(base backup ([0-9.]+) MB in ([0-9.]+) s, ready after ([0-9.]+) s\)`)
)

// setupOnce builds a fresh lab, times the engine's Up in it, and tears
// everything down again.
func (b *bench) setupOnce(ctx context.Context, t topology, rep int) (run setupRun, err error) {
	run.Rep = rep
	s, err := t.load()
	if err != nil {
		return run, err
	}
	links, err := standbyLinks(s)
	if err != nil {
		return run, fmt.Errorf("%s: %w", t.describe(), err)
	}
	// The machine calms down before the lab starts: ready_s includes it.
	if run.Quiet, err = benchkit.WaitQuiet(ctx, quiet); err != nil {
		return run, err
	}
	t0 := time.Now()
	l, err := benchkit.StartLab(ctx, s, logf)
	if err != nil {
		return run, fmt.Errorf("start lab: %w", err)
	}
	defer closeLab(l)
	run.LabUpS = benchkit.Round(time.Since(t0).Seconds(), 3)

	var dirs []string
	for _, sl := range links {
		dirs = append(dirs, sl.Dir)
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
	run.ReadyS = benchkit.Round(run.LabUpS+run.SetupS, 3)
	if samplesDir != "" {
		path := filepath.Join(samplesDir, fmt.Sprintf("%s-%d.csv", t.id, rep))
		if err := tl.writeCSV(path); err != nil {
			logf("      warning: %v", err)
		}
	}
	run.Events = tl.events

	// The engine's progress lines date each phase.
	begun := map[string]float64{}
	last := 0.0
	firstBegin, lastReady := math.Inf(1), 0.0 // the standbys' span
	for _, ev := range tl.events {
		switch {
		case rePrimary.MatchString(ev.Line):
			run.PrimaryS = benchkit.Round(ev.T, 3)
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
			i := slices.IndexFunc(links, func(sl standbyLink) bool { return sl.Node == node })
			if i < 0 {
				return run, fmt.Errorf("unknown standby %s", node)
			}
			// The engine times from just before its first line: its end is
			// start + backup, within a millisecond.
			sr := standbyRun{Node: node, Link: links[i], StartedAtS: benchkit.Round(from, 3), BasebackupS: backup, CopyBytes: int64(math.Round(mb * 1e6)),
				StandbyStartS: benchkit.Round(ready-backup, 3), transfer: tl.transfer(i, from, from+backup, links[i].RateBps)}
			sr.CopyAtRateS = benchkit.Round(float64(sr.CopyBytes)*8/links[i].RateBps, 3)
			sr.LinkAtRateS = benchkit.Round(float64(sr.LinkBytes)*8/links[i].RateBps, 3)
			sr.end = from + backup
			run.Standbys = append(run.Standbys, sr)
			firstBegin, lastReady = min(firstBegin, from), max(lastReady, from+ready)
			last = ev.T
		}
	}
	if len(run.Standbys) != len(links) {
		return run, fmt.Errorf("the engine reported %d standbys streaming, want %d", len(run.Standbys), len(links))
	}
	for k := range run.Standbys {
		sr := &run.Standbys[k]
		i := slices.IndexFunc(links, func(sl standbyLink) bool { return sl.Node == sr.Node })
		b0, _ := tl.bytesAt(i, sr.end)
		b1, _ := tl.bytesAt(i, run.SetupS+1)
		sr.LinkBytesAfter = b1 - b0
		if sr.CopyAtRateS > run.IdealS {
			run.IdealS, run.Slowest = sr.CopyAtRateS, sr.Node
		}
		run.IdealLinkS = max(run.IdealLinkS, sr.LinkAtRateS)
	}
	run.FlowingS = benchkit.Round(run.SetupS-last, 3)
	run.OtherS = benchkit.Round(run.SetupS-run.PrimaryS-(lastReady-firstBegin)-run.FlowingS, 3)
	run.TargetS = benchkit.Round(targetFactor*(targetBaseS+run.IdealS), 3)
	run.Ratio = benchkit.Round(run.ReadyS/run.TargetS, 3)
	run.TargetLinkS = benchkit.Round(targetFactor*(targetBaseS+run.IdealLinkS), 3)
	run.RatioLink = benchkit.Round(run.ReadyS/run.TargetLinkS, 3)
	return run, nil
}

// setups runs one topology's repetitions and adds its figures.
func (b *bench) setups(ctx context.Context, t topology) error {
	var runs []setupRun
	for rep := 1; rep <= t.reps; rep++ {
		r, err := b.setupOnce(ctx, t, rep)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", rep, err)
		}
		runs = append(runs, r)
		line := fmt.Sprintf("      run %d: ready %.2f s = %.2f × target %.2f s (ideal %.2f s, %s); primary %.2f s", rep, r.ReadyS, r.Ratio, r.TargetS, r.IdealS, r.Slowest, r.PrimaryS)
		for _, s := range r.Standbys {
			line += fmt.Sprintf("; %s backup %.2f s for %.1f MB copied, %.1f MB over the link (at rate %.2f s; first data after %.2f s, ramp %.2f s, bulk %.1f Mbit/s, tail %.2f s), start %.2f s",
				s.Node, s.BasebackupS, float64(s.CopyBytes)/1e6, float64(s.LinkBytes)/1e6, s.LinkAtRateS, s.FirstDataS, s.RampS, s.BulkMbps, s.TailS, s.StandbyStartS)
		}
		line += fmt.Sprintf("; flowing %.2f s", r.FlowingS)
		for _, s := range r.Standbys {
			line += fmt.Sprintf("; %s link after its backup %.1f MB", s.Node, float64(s.LinkBytesAfter)/1e6)
		}
		logf("%s", line)
	}
	b.addSetup(t, runs)
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

// spread is the smallest and largest of xs.
func spread(xs []float64) [2]float64 {
	if len(xs) == 0 {
		return [2]float64{}
	}
	return [2]float64{slices.Min(xs), slices.Max(xs)}
}

// col collects one number from every run (or every standby of every run).
func col(runs []setupRun, f func(setupRun) float64) []float64 {
	var out []float64
	for _, r := range runs {
		out = append(out, f(r))
	}
	return out
}

func colStandby(runs []setupRun, node string, f func(standbyRun) float64) []float64 {
	var out []float64
	for _, r := range runs {
		for _, s := range r.Standbys {
			if node == "" || s.Node == node {
				out = append(out, f(s))
			}
		}
	}
	return out
}

func (b *bench) addSetup(t topology, runs []setupRun) {
	var linkDesc []string
	for _, s := range runs[0].Standbys {
		linkDesc = append(linkDesc, fmt.Sprintf("%s: %g ms each way, %g Mbit/s", s.Node, s.Link.DelayMs, s.Link.RateBps/1e6))
	}
	slices.Sort(linkDesc)
	cfg := map[string]any{
		"topology": t.describe(), "standby_links": linkDesc, "repetitions": t.reps,
		"copy": "standbys of one upstream copied at the same time, each by pg_basebackup run in its own site",
	}
	if t.queue != "" {
		cfg["queue"] = t.queue
	}
	ready := col(runs, func(r setupRun) float64 { return r.ReadyS })
	ratio := col(runs, func(r setupRun) float64 { return r.Ratio })
	ideal := col(runs, func(r setupRun) float64 { return r.IdealS })
	target := col(runs, func(r setupRun) float64 { return r.TargetS })
	ratioLink := col(runs, func(r setupRun) float64 { return r.RatioLink })
	breakdown := map[string]any{
		"lab_up_s":                   median(col(runs, func(r setupRun) float64 { return r.LabUpS })),
		"setup_s":                    median(col(runs, func(r setupRun) float64 { return r.SetupS })),
		"primary_start_s":            median(col(runs, func(r setupRun) float64 { return r.PrimaryS })),
		"flowing_s":                  median(col(runs, func(r setupRun) float64 { return r.FlowingS })),
		"ideal_link_bytes_s":         median(col(runs, func(r setupRun) float64 { return r.IdealLinkS })),
		"ready_to_target_link_bytes": median(ratioLink),
	}
	for _, s := range runs[0].Standbys {
		n := s.Node
		breakdown[n] = map[string]any{
			"basebackup_s":            median(colStandby(runs, n, func(s standbyRun) float64 { return s.BasebackupS })),
			"copy_bytes":              median(colStandby(runs, n, func(s standbyRun) float64 { return float64(s.CopyBytes) })),
			"copy_s_at_rate":          median(colStandby(runs, n, func(s standbyRun) float64 { return s.CopyAtRateS })),
			"link_bytes":              median(colStandby(runs, n, func(s standbyRun) float64 { return float64(s.LinkBytes) })),
			"link_s_at_rate":          median(colStandby(runs, n, func(s standbyRun) float64 { return s.LinkAtRateS })),
			"first_data_s":            median(colStandby(runs, n, func(s standbyRun) float64 { return s.FirstDataS })),
			"ramp_s":                  median(colStandby(runs, n, func(s standbyRun) float64 { return s.RampS })),
			"bulk_mbps":               median(colStandby(runs, n, func(s standbyRun) float64 { return s.BulkMbps })),
			"tail_s":                  median(colStandby(runs, n, func(s standbyRun) float64 { return s.TailS })),
			"standby_start_s":         median(colStandby(runs, n, func(s standbyRun) float64 { return s.StandbyStartS })),
			"link_bytes_after_backup": median(colStandby(runs, n, func(s standbyRun) float64 { return float64(s.LinkBytesAfter) })),
		}
	}
	suffix := "_" + strings.ReplaceAll(t.id, "-", "_")
	targetMed := median(target)
	b.r.Add(Figure{
		Name: "ready" + suffix + "_s", Value: benchkit.Round(median(ready), 3), Configured: cfg,
		Target:    fmt.Sprintf("<= %.2f s: %.1f × (%.0f s + the slowest base backup's bytes at its link's rate)", targetMed, targetFactor, targetBaseS),
		TargetMax: benchkit.Ptr(targetMed),
		Note: "median over fresh labs: the lab's start plus postgres.Engine.Up, until every node runs and a marker from the primary is visible at every standby " +
			"(what `replab lab up` takes before it prints ready; medians of the parts do not add up exactly)",
		Details: map[string]any{"spread_s": spread(ready), "breakdown_medians": breakdown, "runs": runs},
	})
	b.r.Add(Figure{Name: "ideal" + suffix + "_s", Value: benchkit.Round(median(ideal), 3), Configured: cfg,
		Note:    "the slowest base backup's bytes (the copy's size on disk, as the engine reports it) × 8 / its link's rate (median over runs)",
		Details: map[string]any{"spread_s": spread(ideal)}})
	b.r.Add(Figure{Name: "ready_to_target" + suffix, Value: benchkit.Round(median(ratio), 3), Configured: cfg,
		Target: "<= 1", TargetMax: benchkit.Ptr(1.0),
		Note: fmt.Sprintf("ready_s / (%.1f × (%.0f s + ideal_s)), per run, median; with the bytes that crossed the link instead of the copy's size: %.3f",
			targetFactor, targetBaseS, median(ratioLink)),
		Details: map[string]any{"spread": spread(ratio), "spread_link_bytes": spread(ratioLink)}})
	if !t.headline {
		return
	}
	b.r.Add(Figure{Name: "primary_start_s", Value: median(col(runs, func(r setupRun) float64 { return r.PrimaryS })), Configured: cfg,
		Note: "Up's start until the primary accepts connections with the replab database and marker table (initdb, configuration, start)"})
	for _, s := range runs[0].Standbys {
		n := s.Node
		bd := breakdown[n].(map[string]any)
		b.r.Add(Figure{Name: "basebackup_" + n + "_s", Value: bd["basebackup_s"], Configured: cfg,
			Note: fmt.Sprintf("%s's pg_basebackup across its link (%g ms each way, %g Mbit/s) plus its configuration (median): %.1f MB copied (%.3f s at the rate), %.1f MB over the link (%.3f s); first data after %.2f s, %.2f s to reach 90 %% of the rate, tail %.2f s",
				n, s.Link.DelayMs, s.Link.RateBps/1e6, bd["copy_bytes"].(float64)/1e6, bd["copy_s_at_rate"], bd["link_bytes"].(float64)/1e6, bd["link_s_at_rate"], bd["first_data_s"], bd["ramp_s"], bd["tail_s"])})
	}
	b.r.Add(Figure{Name: "standby_start_s", Value: median(colStandby(runs, "", func(s standbyRun) float64 { return s.StandbyStartS })), Configured: cfg,
		Note: "a standby's postgres start until it accepts connections (median over standbys and runs)"})
	b.r.Add(Figure{Name: "flowing_s", Value: median(col(runs, func(r setupRun) float64 { return r.FlowingS })), Configured: cfg,
		Note: "the last standby's start until Up returned: the marker written at the primary becoming visible at every standby"})
}

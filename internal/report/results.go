package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/driver"
	"replab/internal/fault"
	"replab/internal/monitor"
	"replab/internal/pagestats"
	"replab/internal/stats"
)

// Summary is summary.json: the headline figures of one run (the measure
// phase only). Its fields are documented in docs/metrics.md.
type Summary struct {
	// Kind is "run" (one measurement) or "repetitions" (an aggregate:
	// headline figures are means over the repetitions, with CIs).
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	Complete   bool      `json:"complete"`
	StopReason string    `json:"stop_reason,omitempty"`
	Started    time.Time `json:"started"`
	SpecFile   string    `json:"spec_file"`
	Engine     string    `json:"engine"`
	Scheme     string    `json:"scheme"`
	Workload   string    `json:"workload"`

	Mode           string  `json:"mode"`
	Users          int     `json:"users"`
	TargetRate     float64 `json:"target_rate_per_s,omitempty"`
	MeasureSeconds float64 `json:"measure_s"`
	// [run] transactions: the count, and how many of its transactions
	// finished (fewer when the duration ended the measure phase first).
	TransactionsTarget int64                         `json:"transactions_target,omitempty"`
	TransactionsDone   int64                         `json:"transactions_done,omitempty"`
	TPM                float64                       `json:"tpm"`
	TPS                float64                       `json:"tps"`
	Transactions       int64                         `json:"transactions"`
	RowsChanged        int64                         `json:"rows_changed"`
	Errors             int64                         `json:"errors"`
	Retries            int64                         `json:"retries"`
	Conflicts          int64                         `json:"conflicts"`
	CommitLatency      stats.Percentiles             `json:"commit_latency_ms"`
	Types              map[string]*driver.TypeResult `json:"types"`
	BehindScheduleMs   *stats.Percentiles            `json:"behind_schedule_ms,omitempty"`
	Skipped            int64                         `json:"skipped,omitempty"`
	SkippedLatencyMs   *stats.Percentiles            `json:"skipped_latency_ms,omitempty"`

	Replicas map[string]*Replica `json:"replicas"`

	// Monitors, over the measure phase (package monitor): per link
	// direction "a->b" bytes, packets, drops and utilization of the
	// configured rate; bytes on the wire (every direction) per committed
	// transaction; CPU, I/O wait and memory per node and process role;
	// whether I/O wait was measured (kernel delay accounting); the
	// engine's replication state and a one-line verdict per replica.
	Links               map[string]monitor.LinkSummary            `json:"links"`
	BytesPerTransaction float64                                   `json:"bytes_per_transaction"`
	Roles               map[string]map[string]monitor.RoleSummary `json:"roles"`
	IOWaitMeasured      bool                                      `json:"io_wait_measured"`
	Replication         map[string]monitor.ReplicaSummary         `json:"replication,omitempty"`
	Verdicts            map[string]string                         `json:"verdicts,omitempty"`
	// Gauges are the engine's own figures by node (a JVM's heap and GC
	// time), over the measure phase.
	Gauges  map[string]map[string]monitor.GaugeSummary `json:"gauges,omitempty"`
	Monitor *MonitorInfo                               `json:"monitor,omitempty"`

	// Steady says whether throughput held steady in the measure phase.
	Steady *stats.Steadiness `json:"steady,omitempty"`

	// Convergence: after the run, whether every copy holds the same rows
	// (engines that can tell, engine.Checksummer).
	Convergence *Convergence `json:"convergence,omitempty"`
	// ReplicationConflicts: the conflicts a multi-master scheme's
	// replication detected and resolved by itself (engine.ConflictCounter).
	ReplicationConflicts *ReplicationConflicts `json:"replication_conflicts,omitempty"`
	// Verification: every acknowledged commit looked for at every node after
	// the run ([run] verify; on with [[fault]]s).
	Verification *Verification `json:"verification,omitempty"`
	// SyncFallbacks: how often and how long a synchronous scheme ran
	// asynchronously in the measure phase (engine.SyncFallbacker).
	SyncFallbacks *SyncFallbacks `json:"sync_fallbacks,omitempty"`

	// Faults: each scheduled fault and the run around it (package fault);
	// faults.csv logs every fault applied and healed.
	Faults []fault.Summary `json:"faults,omitempty"`

	// Search: a saturation search's steps, knee and exhaust point (this
	// summary is then the knee step's; [run] search).
	Search *Search `json:"search,omitempty"`
	// LinkSearch: a search over a link parameter, every probe and the
	// answer (this summary is then the answer's probe; [run] search =
	// "link[N].rate").
	LinkSearch *LinkSearch `json:"link_search,omitempty"`

	// Pages: a page-read run's pages (workload page-read; pages.csv has
	// every page).
	Pages *pagestats.Summary `json:"pages,omitempty"`

	// Consistency: what the check of the run's history found ([run]
	// history; check.json has every detail).
	Consistency *Consistency `json:"consistency,omitempty"`

	// With repetitions: a confidence interval for every headline figure
	// ("tpm", "commit_latency_ms.p99", "replicas.e1.lag_ms.p50", …), tpm's
	// also as tpm_ci, and one line per repetition.
	TPMCI       *stats.CI           `json:"tpm_ci,omitempty"`
	CI          map[string]stats.CI `json:"ci,omitempty"`
	Repetitions []Repetition        `json:"repetitions,omitempty"`
	// RepetitionsNeeded is Jain's estimate from the pilot, when a
	// confidence target was set.
	RepetitionsNeeded int `json:"repetitions_needed,omitempty"`

	Load   *Load   `json:"load,omitempty"`
	SetupS float64 `json:"setup_s"`
	// Provision says over which links the lab was built and loaded:
	// "link" (the configured ones) or "fast" (unshaped, the configured
	// conditions applied when the measurement started).
	Provision   string      `json:"provision,omitempty"`
	Environment Environment `json:"environment"`
}

// MonitorInfo describes the monitors themselves: the sampling interval,
// why I/O wait was or was not measured, what sampling cost, and samples
// that failed.
type MonitorInfo struct {
	IntervalS  float64      `json:"interval_s"`
	IOWaitNote string       `json:"io_wait_note,omitempty"`
	Cost       monitor.Cost `json:"cost"`
	Warnings   []string     `json:"warnings,omitempty"`
}

// Repetition is one measurement of a repeated run.
type Repetition struct {
	Dir          string             `json:"dir"`
	Complete     bool               `json:"complete"`
	TPM          float64            `json:"tpm"`
	CommitP99Ms  float64            `json:"commit_latency_p99_ms"`
	LagP50Ms     map[string]float64 `json:"lag_p50_ms,omitempty"`
	Transactions int64              `json:"transactions"`
	// LagSampleEvery is the repetition's SampleEvery (the same at every
	// replica).
	LagSampleEvery int `json:"lag_sample_every,omitempty"`
	// Verdicts are the repetition's own, per replica (the aggregate's
	// Verdicts tally them).
	Verdicts map[string]string `json:"verdicts,omitempty"`
	// Anomalies is how many the check of its history found (absent when
	// it recorded none).
	Anomalies *int64 `json:"anomalies,omitempty"`
}

// Replica is one replica's replication latency.
type Replica struct {
	Site            string            `json:"site"`
	LagMs           stats.Percentiles `json:"lag_ms"`
	LagMinMs        float64           `json:"lag_min_ms"` // exact, like lag_ms.max
	NotVisibleAtEnd int64             `json:"not_visible_at_end"`
	Tracked         int64             `json:"tracked"`
	// LagMethod is how the lag was measured: "positions" (every
	// transaction's commit position against the replica's applied
	// position, LagPosition: "WAL replay LSN", …) or "stamps" (a tracked
	// sample's stamps read back here). Results written before it had stamps.
	LagMethod   string `json:"lag_method,omitempty"`
	LagPosition string `json:"lag_position,omitempty"`
	// Unpositioned counts, by position, the measured transactions that
	// committed with no position to compare: they have no lag.
	Unpositioned int64 `json:"unpositioned,omitempty"`
	// SampleEvery: every SampleEvery-th transaction of each user was
	// tracked in the measure phase (1 = all of them). Sample says who set
	// it: "fixed" (lag_sample = N) or "auto" (the driver, for at most
	// SampleBudgetPerS tracked transactions per second). An aggregate of
	// repetitions whose N differed has SampleEvery 0 (each repetition's is
	// in Repetitions).
	SampleEvery      int     `json:"sample_every,omitempty"`
	Sample           string  `json:"sample,omitempty"`
	SampleBudgetPerS float64 `json:"sample_budget_per_s,omitempty"`
	// ResolutionMs is the lag watcher's achieved poll interval: each lag is
	// at most one interval plus one poll (PollP99Ms) above the true one.
	ResolutionMs float64 `json:"resolution_ms"`
	PollP99Ms    float64 `json:"poll_p99_ms"`
	// The watcher's adaptive polling: polls made, the final floor (no
	// poll before COMMIT sent + floor) and window hits (transactions seen
	// by their window's first poll, each halving the floor).
	Polls              int64   `json:"polls,omitempty"`
	FloorMs            float64 `json:"floor_ms,omitempty"`
	WindowHits         int64   `json:"window_hits,omitempty"`
	VisibleBeforeWatch int64   `json:"visible_before_watch,omitempty"`
	// EngineReplayLagMs is the engine's own view, sampled each second
	// (PostgreSQL: pg_stat_replication.replay_lag), as a cross-check.
	EngineReplayLagMs *stats.Percentiles `json:"engine_replay_lag_ms,omitempty"`
	EngineBytesBehind int64              `json:"engine_bytes_behind_max,omitempty"`
	// EngineBacklogMax is the engine's largest backlog in the phase, in
	// EngineBacklogUnit (bytes, transactions, write-sets).
	EngineBacklogMax  int64  `json:"engine_backlog_max,omitempty"`
	EngineBacklogUnit string `json:"engine_backlog_unit,omitempty"`
	// CatchUpMs is the catch-up when the measurement ended: from the
	// COMMIT of the measure phase's last tracked transaction (within
	// about 1/budget s of its last commit with the automatic sample) until
	// it was visible here, every earlier commit with it.
	CatchUpMs *float64 `json:"catch_up_ms,omitempty"`
	// NotCaughtUpS, when set, is how long the run waited after the driver
	// stopped without this replica showing every tracked transaction: its
	// catch-up is longer, and unknown.
	NotCaughtUpS *float64 `json:"not_caught_up_s,omitempty"`
	// LagClock is how lag was timed in target mode (engine.LagBound):
	// absent in a lab, whose sites share one clock.
	LagClock *LagClock `json:"lag_clock,omitempty"`
}

// LagClock says how a replica's lags were timed when its watcher did not
// share the lab's one clock beside it (target mode).
type LagClock struct {
	// Method: "remote-poll" (polled from the driver's host, each poll's
	// end moved back by the one-way time) or "agent" (polled by a replab
	// agent on the replica's host, whose clock offset is estimated).
	Method string `json:"method"`
	// CorrectionMs is the one-way time taken off, or the agent's clock
	// offset (its clock minus the driver's).
	CorrectionMs float64 `json:"correction_ms"`
	// BoundMs: every lag at this replica may be off by up to ± this much
	// from the correction, besides the watcher's resolution.
	BoundMs float64 `json:"bound_ms"`
}

// Load describes the initial data load.
type Load struct {
	Rows     int64   `json:"rows"`
	Seconds  float64 `json:"seconds"`
	RowsPerS float64 `json:"rows_per_s"`
}

// Dir is a results directory being written.
type Dir struct {
	Path string
}

// NewDir creates a results directory; "" picks results/<timestamp>-<name>.
func NewDir(path, name string) (*Dir, error) {
	if path == "" {
		path = filepath.Join("results", time.Now().Format("20060102-150405")+"-"+name)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create results directory: %w", err)
	}
	return &Dir{Path: path}, nil
}

// File returns the path of a file in the directory.
func (d *Dir) File(name string) string { return filepath.Join(d.Path, name) }

// WriteJSON writes v as indented JSON.
func (d *Dir) WriteJSON(name string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keys like "primary->eu" stay readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	tmp := d.File(name + ".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return os.Rename(tmp, d.File(name))
}

// CopyFile copies src into the directory as name.
func (d *Dir) CopyFile(src, name string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(d.File(name), b, 0o644)
}

// WriteSeries writes the driver's per-second series as CSV.
func (d *Dir) WriteSeries(series []driver.Second) error {
	var b strings.Builder
	b.WriteString("t_s,phase,commits,errors,latency_p50_ms,latency_p99_ms,latency_max_ms\n")
	for _, s := range series {
		fmt.Fprintf(&b, "%d,%s,%d,%d,%.3f,%.3f,%.3f\n", s.T, s.Phase, s.Commits, s.Errors, s.P50Ms, s.P99Ms, s.MaxMs)
	}
	return os.WriteFile(d.File("series.csv"), []byte(b.String()), 0o644)
}

// WriteHistLog writes histograms (µs) in the HdrHistogram log format, one
// interval each, tagged with their names.
func (d *Dir) WriteHistLog(name string, hists map[string]*hdrhistogram.Histogram) error {
	f, err := os.Create(d.File(name))
	if err != nil {
		return err
	}
	defer f.Close()
	w := hdrhistogram.NewHistogramLogWriter(f)
	_ = w.OutputComment("replab: values in microseconds")
	keys := make([]string, 0, len(hists))
	for k := range hists {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h := hists[k]
		if h == nil {
			continue
		}
		h.SetTag(k)
		if err := w.OutputIntervalHistogram(h); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// PrintSummary writes the end-of-run table. For an aggregate of
// repetitions (Kind "repetitions") the tables hold means over the
// complete repetitions, with a row of confidence half-widths (±) under
// the headline ones, and the counts are sums over them.
func PrintSummary(w io.Writer, s *Summary) {
	agg := s.Kind == "repetitions"
	n := completeRepetitions(s)
	state := "complete"
	if !s.Complete {
		state = "INCOMPLETE: " + s.StopReason
	}
	fmt.Fprintf(w, "\nrun %s (%s, %s, %s): %s\n", s.Name, s.Engine, s.Scheme, s.Workload, state)
	if s.Search != nil {
		PrintSearch(w, s.Search)
		if s.Search.KneeStep == 0 {
			return
		}
		fmt.Fprintf(w, "\nthe knee, step %d (%s):\n", s.Search.KneeStep, s.Search.Steps[s.Search.KneeStep-1].Dir)
	}
	if s.LinkSearch != nil {
		if !printLinkSearchHead(w, s.LinkSearch) {
			return
		}
	}
	loop := fmt.Sprintf("closed loop, %d users", s.Users)
	if s.Mode == "open" {
		loop = fmt.Sprintf("open loop, target %.2f/s, %d connections", s.TargetRate, s.Users)
	}
	measured := fmt.Sprintf("measured %.0f s", s.MeasureSeconds)
	if agg && n > 0 {
		measured = fmt.Sprintf("measured %.0f s × %d repetitions", s.MeasureSeconds/float64(n), n)
	}
	if s.TransactionsTarget > 0 {
		if agg && n > 0 {
			measured += fmt.Sprintf(" (%d transactions each)", s.TransactionsTarget)
		} else if s.TransactionsDone < s.TransactionsTarget {
			measured += fmt.Sprintf(": the duration ended it after %d of [run] transactions = %d", s.TransactionsDone, s.TransactionsTarget)
		} else {
			measured += fmt.Sprintf(": [run] transactions = %d", s.TransactionsTarget)
		}
	}
	fmt.Fprintf(w, "  %s, %s\n", loop, measured)
	if agg {
		fmt.Fprintf(w, "  throughput  %.0f tpm (%.1f tps), mean of %d repetitions\n", s.TPM, s.TPS, n)
	} else {
		fmt.Fprintf(w, "  throughput  %.0f tpm (%.1f tps), %d transactions, %d errors, %d retries\n", s.TPM, s.TPS, s.Transactions, s.Errors, s.Retries)
	}
	printPages(w, s)
	if s.TPMCI != nil {
		fmt.Fprintf(w, "  over %d repetitions: tpm %.0f ± %.0f (%.0f%% confidence)\n", s.TPMCI.N, s.TPMCI.Mean, s.TPMCI.HalfWidth, 100*s.TPMCI.Level)
	}
	if agg {
		fmt.Fprintf(w, "  in all      %d transactions, %d errors, %d retries (sums over the repetitions)\n", s.Transactions, s.Errors, s.Retries)
		fmt.Fprintf(w, "  tables: means of the repetitions; ± rows: their %s confidence half-widths\n", levelText(s))
		if olderAggregate(s) {
			fmt.Fprintf(w, "  —: not recorded as a mean of the repetitions (an aggregate written before replab averaged every figure)\n")
		}
	}
	if s.Steady != nil && !s.Steady.Steady {
		fmt.Fprintf(w, "  warning: throughput was not steady in the measure phase: %s\n", s.Steady.Reason)
	}
	printConflicts(w, s.ReplicationConflicts)
	printConvergence(w, s.Convergence)
	printVerification(w, s.Verification)
	printFallbacks(w, s.SyncFallbacks)
	printConsistency(w, s)
	if b := s.BehindScheduleMs; b != nil {
		fmt.Fprintf(w, "  schedule    behind p99 %s ms, max %s ms, %d skipped\n", shown(s, "behind_schedule_ms.p99", b.P99, "%.2f"),
			shown(s, "behind_schedule_ms.max", b.Max, "%.2f"), s.Skipped)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	heading := "commit latency ms"
	if s.Workload == "page-read" { // a "transaction" is one page read
		heading = "page time ms"
	}
	fmt.Fprintf(tw, "\n%s\tcount\tp50\tp95\tp99\tp99.9\tmax\t\n", heading)
	names := slices.Sorted(maps.Keys(s.Types))
	row := func(label, key, countKey string, count int64, p stats.Percentiles) {
		f := func(q string, v float64) string { return shown(s, key+"."+q, v, "%.2f") }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", label, shown(s, countKey, float64(count), "%.0f"),
			f("p50", p.P50), f("p95", p.P95), f("p99", p.P99), f("p99_9", p.P999), f("max", p.Max))
	}
	if !agg || len(names) > 1 { // one type's figures are the "all" row's
		for _, n := range names {
			if t := s.Types[n]; t != nil {
				row(n, "types."+n+".latency_ms", "types."+n+".count", t.Count, t.LatencyMs)
			}
		}
	}
	switch {
	case agg:
		row("all (mean of repetitions)", "commit_latency_ms", "commit_latency_ms.count", s.CommitLatency.Count, s.CommitLatency)
		h := func(q string) string { return halfWidth(s, "commit_latency_ms."+q, "%.2f") }
		fmt.Fprintf(tw, "±\t%s\t%s\t%s\t%s\t%s\t%s\t\n", halfWidth(s, "commit_latency_ms.count", "%.0f"), h("p50"), h("p95"), h("p99"), h("p99_9"), h("max"))
	case len(names) == 0:
		row("all", "commit_latency_ms", "commit_latency_ms.count", s.CommitLatency.Count, s.CommitLatency)
	}
	if len(s.Replicas) > 0 {
		notVisible := "not visible"
		if agg {
			notVisible += " (sum)"
		}
		fmt.Fprintf(tw, "\nreplication lag ms\tsite\tp50\tp95\tp99\tmax\t%s\tresolution\t\n", notVisible)
		for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
			r := s.Replicas[n]
			if r == nil {
				continue
			}
			k := "replicas." + n + "."
			f := func(q string, v float64) string { return shown(s, k+"lag_ms."+q, v, "%.2f") }
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", n, r.Site, f("p50", r.LagMs.P50), f("p95", r.LagMs.P95), f("p99", r.LagMs.P99),
				f("max", r.LagMs.Max), r.NotVisibleAtEnd, shown(s, k+"resolution_ms", r.ResolutionMs, "%.2f ms"))
			if agg {
				h := func(q string) string { return halfWidth(s, k+"lag_ms."+q, "%.2f") }
				fmt.Fprintf(tw, "±\t\t%s\t%s\t%s\t%s\t\t%s\t\n", h("p50"), h("p95"), h("p99"), h("max"), halfWidth(s, k+"resolution_ms", "%.2f ms"))
			}
		}
	}
	_ = tw.Flush()
	if note := LagSampleNote(s); note != "" {
		fmt.Fprintf(w, "  %s\n", note)
	}
	for _, line := range LagClockNotes(s) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if line := catchUpNote(s); line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if few := fewLagSamples(s); few != "" {
		fmt.Fprintf(w, "  warning: %s\n", few)
	}
	printFaults(w, s)
	printMonitors(w, s)
}

// Verification is the check, after a run with a journal, that every
// acknowledged commit is at every node that holds a full copy.
type Verification struct {
	// Acked counts the writing transactions whose COMMIT was acknowledged
	// (the whole run, every user); Unknown those whose COMMIT was sent and
	// never answered (a broken connection): either may have landed.
	Acked   int64 `json:"acked"`
	Unknown int64 `json:"unknown"`
	// Nodes are the nodes checked; Skipped the others, and why (a partial
	// copy does not hold the journal).
	Nodes   map[string]*NodeVerification `json:"nodes"`
	Skipped map[string]string            `json:"skipped,omitempty"`
	// Lost is the most acknowledged commits missing at any node: 0 means
	// every acknowledged commit survived everywhere.
	Lost          int64   `json:"lost"`
	CheckedAfterS float64 `json:"checked_after_s"`
	Error         string  `json:"error,omitempty"`
}

// NodeVerification is one node's journal against the driver's.
type NodeVerification struct {
	Present int64 `json:"present"` // journal keys found
	// Lost counts acknowledged commits missing here; LostKeys names the
	// first few ("writer/seq").
	Lost     int64    `json:"lost"`
	LostKeys []string `json:"lost_keys,omitempty"`
	// UnacknowledgedButPresent counts commits whose acknowledgement never
	// came (Unknown) but which landed here.
	UnacknowledgedButPresent int64 `json:"unacknowledged_but_present"`
	// Unexpected counts keys here the driver never committed nor sent a
	// COMMIT for (a bug, or a journal left from another run).
	Unexpected int64 `json:"unexpected,omitempty"`
}

// Convergence is the check, after a run has caught up, that every node
// holding a full copy has the same rows in every table of the workload.
type Convergence struct {
	// Converged is true when every table's checksum is the same at every
	// node (in an aggregate: in every repetition).
	Converged bool `json:"converged"`
	Nodes     int  `json:"nodes"`
	Tables    int  `json:"tables"`
	// DivergedTables counts the tables whose checksums differ; Diverged
	// names each with the checksums per node ("p1 81736…, p2 -2231…").
	DivergedTables int               `json:"diverged_tables"`
	Diverged       map[string]string `json:"diverged,omitempty"`
	// CheckedAfterS is how long after the driver stopped the checksums
	// were taken: the cluster had to be flowing (every change everywhere).
	CheckedAfterS float64 `json:"checked_after_s"`
	// Error says why no verdict could be reached (then Converged is
	// false): the cluster did not flow, a checksum failed, or only one
	// node holds a full copy (after a failover).
	Error string `json:"error,omitempty"`
}

// ReplicationConflicts are the conflicts a multi-master scheme found by
// itself — two masters changed the same row before either saw the other's
// change — counted by the engine from the start of the measure phase until
// after the run had caught up. They are not the driver's Conflicts (the
// transactions that failed at commit and were retried), though under
// Galera each certification failure is both.
type ReplicationConflicts struct {
	// Counted says what the engine counts.
	Counted string `json:"counted"`
	Count   int64  `json:"count"`
	// PerS is Count per second of load (the measure phase and the cooldown).
	PerS  float64          `json:"per_s"`
	Nodes map[string]int64 `json:"nodes,omitempty"`
	// Restarted names nodes whose count went back in between (they
	// restarted): theirs is counted since the restart, a lower bound.
	Restarted []string `json:"restarted,omitempty"`
	// NotRead names nodes counted at the start but not after the run.
	NotRead []string `json:"not_read,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// SyncFallbacks are the periods, within the measure phase, in which a
// synchronous scheme committed without a replica's acknowledgement
// (MariaDB semi-sync after its timeout), as the engine polled them.
type SyncFallbacks struct {
	// Count is the periods that overlap the measure phase.
	Count int `json:"count"`
	// AsyncS is the time within the phase spent asynchronous, and
	// AsyncFraction its share of the phase.
	AsyncS        float64 `json:"async_s"`
	AsyncFraction float64 `json:"async_fraction"`
	// ResolutionMs is the engine's polling interval: each start and end is
	// late by up to that much.
	ResolutionMs float64 `json:"resolution_ms"`
	// Periods, in seconds from the start of the measure phase: StartS is
	// negative for a period already going on, EndS absent for one still
	// going on when the run ended. (An aggregate keeps only the counts.)
	Periods []FallbackPeriod `json:"periods,omitempty"`
}

// FallbackPeriod is one asynchronous period of a node.
type FallbackPeriod struct {
	Node   string   `json:"node"`
	StartS float64  `json:"start_s"`
	EndS   *float64 `json:"end_s,omitempty"`
}

// completeRepetitions counts an aggregate's complete repetitions.
func completeRepetitions(s *Summary) int {
	n := 0
	for _, r := range s.Repetitions {
		if r.Complete {
			n++
		}
	}
	if n == 0 && s.TPMCI != nil {
		n = s.TPMCI.N
	}
	return n
}

// levelText is the confidence level of an aggregate's intervals: "95%".
func levelText(s *Summary) string {
	l := 0.95
	if s.TPMCI != nil {
		l = s.TPMCI.Level
	}
	return fmt.Sprintf("%.0f%%", 100*l)
}

// shown prints figure key of s (value v) for the summary tables. In an
// aggregate of repetitions only a mean with its CI is shown: aggregates
// written before every figure had one copied some figures from their
// last repetition, and those print as "—".
func shown(s *Summary, key string, v float64, format string) string {
	if s.Kind == "repetitions" {
		c, ok := s.CI[key]
		if !ok {
			return "—"
		}
		v = c.Mean // the same, but older aggregates kept a repetition's value beside some CIs
	}
	return fmt.Sprintf(format, v)
}

// olderAggregate says whether s is an aggregate written before every
// figure of one was a mean with a CI.
func olderAggregate(s *Summary) bool {
	_, ok := s.CI["commit_latency_ms.p99_9"]
	return s.Kind == "repetitions" && len(s.CI) > 0 && !ok
}

// isShown says whether figure key of s is shown (see shown).
func isShown(s *Summary, key string) bool {
	_, ok := s.CI[key]
	return ok || s.Kind != "repetitions"
}

// halfWidth prints the confidence half-width of figure key ("" without
// one, or with a single repetition).
func halfWidth(s *Summary, key, format string) string {
	c, ok := s.CI[key]
	if !ok || !c.Bounded() {
		return ""
	}
	return fmt.Sprintf(format, c.HalfWidth)
}

// minLagSamples is how many lags a replica needs before its p99 means
// something: with fewer, the summary suggests tracking more.
const minLagSamples = 100

// fewLagSamples names the replicas whose lag rests on fewer than
// minLagSamples sampled transactions ("" when none, or when every
// transaction was tracked: then the run was simply short or slow).
func fewLagSamples(s *Summary) string {
	var few []string
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		r := s.Replicas[n]
		if r != nil && r.SampleEvery > 1 && r.LagMethod != "positions" && r.LagMs.Count < minLagSamples {
			few = append(few, fmt.Sprintf("%s (%d)", n, r.LagMs.Count))
		}
	}
	if len(few) == 0 {
		return ""
	}
	return fmt.Sprintf("few lag samples at %s: the sample is per user, and users that commit rarely (e.g. across a WAN link) are tracked rarely; set [run] lag_sample = 1 to track every transaction", strings.Join(few, ", "))
}

// catchUpNote says how long each replica took to apply the measure
// phase's last tracked transaction after its COMMIT: "caught up after the
// measurement (…): t1 1.240 s, t2 0.004 s". Only when one of them took
// 1 ms or more.
func catchUpNote(s *Summary) string {
	var parts []string
	late := false
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		r := s.Replicas[n]
		switch {
		case r == nil:
		case r.NotCaughtUpS != nil:
			late = true
			parts = append(parts, fmt.Sprintf("%s not within the %.0f s waited", n, *r.NotCaughtUpS))
		case r.CatchUpMs != nil:
			late = late || *r.CatchUpMs >= 1
			parts = append(parts, fmt.Sprintf("%s %.3f s", n, *r.CatchUpMs/1000))
		}
	}
	if !late {
		return ""
	}
	return "caught up after the measurement (its last tracked commit visible): " + strings.Join(parts, ", ")
}

// LagSampleNote says how the lag figures were measured: by commit
// position, every transaction ("lag of every transaction, by commit
// position (WAL replay LSN)"), and by stamps when they are a sample ("lag
// tracked for every 11th transaction of each user (auto: ≤ 10 tracked/s
// at the warmup's rate)"); with both, at which replicas. "" when every
// transaction was stamped.
func LagSampleNote(s *Summary) string {
	var byPos, stamped []string
	var r *Replica // the first stamped replica: the sample is the same at all
	position := ""
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		x := s.Replicas[n]
		switch {
		case x == nil:
		case x.LagMethod == "positions":
			byPos = append(byPos, n)
			if position == "" || position == x.LagPosition {
				position = x.LagPosition
			} else {
				position = "each replica's applied position"
			}
		default:
			stamped = append(stamped, n)
			if r == nil {
				r = x
			}
		}
	}
	if len(byPos) == 0 {
		return stampNote(s, r)
	}
	note := "lag of every transaction, by commit position"
	if position != "" {
		note += " (" + position + ")"
	}
	if len(stamped) == 0 {
		return note
	}
	note += " at " + strings.Join(byPos, ", ") + "; by stamps at " + strings.Join(stamped, ", ")
	if sn := stampNote(s, r); sn != "" {
		note += ": " + sn
	}
	return note
}

// stampNote is LagSampleNote for stamped replicas, r the first.
func stampNote(s *Summary, r *Replica) string {
	if r == nil {
		return ""
	}
	how := fmt.Sprintf("lag_sample = %d", r.SampleEvery)
	if r.Sample == "auto" {
		// N is chosen from a rate known before the measure phase.
		basis := "the warmup's rate"
		if s.Mode == "open" {
			basis = "the target rate"
		}
		how = fmt.Sprintf("auto: ≤ %s tracked/s at %s", strconvFloat(r.SampleBudgetPerS), basis)
	}
	if r.SampleEvery > 1 {
		return fmt.Sprintf("lag tracked for every %s transaction of each user (%s)", ordinal(r.SampleEvery), how)
	}
	// Repetitions whose automatic samples differ.
	lo, hi := 0, 0
	for _, rep := range s.Repetitions {
		if n := rep.LagSampleEvery; n > 0 {
			if lo == 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
	}
	if r.SampleEvery == 0 && hi > 1 {
		return fmt.Sprintf("lag tracked for every Nth transaction of each user, N from %d to %d by repetition (%s)", lo, hi, how)
	}
	return ""
}

// LagClockNotes say, per replica in target mode, how its lags were timed
// and how far they may be off.
func LagClockNotes(s *Summary) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		r := s.Replicas[n]
		if r == nil || r.LagClock == nil {
			continue
		}
		lc := r.LagClock
		switch lc.Method {
		case "remote-poll":
			out = append(out, fmt.Sprintf("lag at %s polled from this host: %.2f ms one-way taken off each poll, ± %.2f ms (half the spread of poll round trips)", n, lc.CorrectionMs, lc.BoundMs))
		case "agent":
			out = append(out, fmt.Sprintf("lag at %s polled by its agent: clock offset %+.2f ms, ± %.2f ms", n, lc.CorrectionMs, lc.BoundMs))
		default:
			out = append(out, fmt.Sprintf("lag at %s: %s, %.2f ms, ± %.2f ms", n, lc.Method, lc.CorrectionMs, lc.BoundMs))
		}
	}
	return out
}

// ordinal writes 2nd, 3rd, 4th, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

func strconvFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// printMonitors writes the monitors' part of the end-of-run table: bytes
// and utilization per link direction, CPU and I/O wait per node and
// process role (busiest first, like the GoldenGate study's table by
// session type), bytes per transaction and each replica's verdict.
func printMonitors(w io.Writer, s *Summary) {
	agg := s.Kind == "repetitions"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(s.Links) > 0 {
		fmt.Fprintln(tw, "\nlink\tbytes\tpackets\tdropped\tutil avg\tutil peak\tqueue peak B\t")
		for _, k := range slices.Sorted(maps.Keys(s.Links)) {
			l := s.Links[k]
			p := "links." + k + "."
			dropped := "—"
			if isShown(s, p+"dropped_queue_packets") && isShown(s, p+"dropped_loss_packets") && isShown(s, p+"dropped_other_packets") {
				dropped = strconv.FormatUint(l.DroppedQueuePackets+l.DroppedLossPackets+l.DroppedOtherPackets, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k, shown(s, p+"bytes", float64(l.Bytes), "%.0f"), shown(s, p+"packets", float64(l.Packets), "%.0f"),
				dropped, utilText(s, p+"utilization_avg_pct", l.UtilizationAvgPct), utilText(s, p+"utilization_peak_pct", l.UtilizationPeakPct),
				shown(s, p+"queue_peak_bytes", float64(l.QueuePeakBytes), "%.0f"))
			if agg {
				fmt.Fprintf(tw, "±\t%s\t%s\t\t%s\t%s\t%s\t\n", halfWidth(s, p+"bytes", "%.0f"), halfWidth(s, p+"packets", "%.0f"),
					halfWidth(s, p+"utilization_avg_pct", "%.1f%%"), halfWidth(s, p+"utilization_peak_pct", "%.1f%%"), halfWidth(s, p+"queue_peak_bytes", "%.0f"))
			}
		}
	}
	if len(s.Roles) > 0 {
		io := "io wait s"
		if !s.IOWaitMeasured {
			io = "io wait (not measured)"
		}
		fmt.Fprintf(tw, "\nwhere the time goes\trole\tprocs\tcpu s\tcores\t%s\trss peak MiB\t\n", io)
		for _, node := range slices.Sorted(maps.Keys(s.Roles)) {
			roles := s.Roles[node]
			names := slices.Sorted(maps.Keys(roles))
			sort.SliceStable(names, func(i, j int) bool { return roles[names[i]].CPUS > roles[names[j]].CPUS })
			for _, role := range names {
				rs := roles[role]
				if rs.CPUS == 0 && rs.IOWaitS == 0 {
					continue // idle helpers
				}
				p := "roles." + node + "." + role + "."
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", node, role, shown(s, p+"processes", float64(rs.Processes), "%.0f"),
					shown(s, p+"cpu_s", rs.CPUS, "%.2f"), shown(s, p+"cpu_cores", rs.CPUCores, "%.2f"), shown(s, p+"io_wait_s", rs.IOWaitS, "%.2f"),
					shown(s, p+"rss_peak_bytes", float64(rs.RSSPeakBytes)/(1<<20), "%.0f"))
			}
		}
	}
	_ = tw.Flush()
	if s.BytesPerTransaction > 0 {
		pm := ""
		if h := halfWidth(s, "bytes_per_transaction", "%.0f"); h != "" {
			pm = " ± " + h
		}
		fmt.Fprintf(w, "  on the wire %s%s bytes per transaction (every link direction)\n", shown(s, "bytes_per_transaction", s.BytesPerTransaction, "%.0f"), pm)
	}
	for _, n := range slices.Sorted(maps.Keys(s.Verdicts)) {
		v := s.Verdicts[n]
		if olderAggregate(s) {
			v += " (the last repetition's: an older aggregate)"
		}
		fmt.Fprintf(w, "  verdict     %s: %s\n", n, v)
	}
}

// utilText writes a utilization, or "-" for an unlimited link.
func utilText(s *Summary, key string, p *float64) string {
	if p == nil {
		return "-"
	}
	return shown(s, key, *p, "%.1f%%")
}

// printConflicts gives the conflicts replication found by itself.
func printConflicts(w io.Writer, c *ReplicationConflicts) {
	switch {
	case c == nil:
	case c.Error != "":
		fmt.Fprintf(w, "  conflicts   %s (%s)\n", c.Error, c.Counted)
	default:
		var per []string
		for _, n := range slices.Sorted(maps.Keys(c.Nodes)) {
			per = append(per, fmt.Sprintf("%s %d", n, c.Nodes[n]))
		}
		fmt.Fprintf(w, "  conflicts   %d found by replication (%.2f/s of load): %s; counted: %s\n", c.Count, c.PerS, strings.Join(per, ", "), c.Counted)
		if len(c.Restarted) > 0 {
			fmt.Fprintf(w, "    restarted, counted since: %s\n", strings.Join(c.Restarted, ", "))
		}
		if len(c.NotRead) > 0 {
			fmt.Fprintf(w, "    not read after the run: %s\n", strings.Join(c.NotRead, ", "))
		}
	}
}

// printConvergence says whether the copies agreed, loudly when not.
func printConvergence(w io.Writer, c *Convergence) {
	switch {
	case c == nil:
	case c.Error != "":
		fmt.Fprintf(w, "  copies      not compared: %s\n", c.Error)
	case c.Converged:
		fmt.Fprintf(w, "  copies      converged: %d tables the same at %d nodes\n", c.Tables, c.Nodes)
	default:
		fmt.Fprintf(w, "  warning: the copies DIVERGED: %d of %d tables differ between nodes\n", c.DivergedTables, c.Tables)
		for _, t := range slices.Sorted(maps.Keys(c.Diverged)) {
			fmt.Fprintf(w, "    %s: %s\n", t, c.Diverged[t])
		}
	}
}

// printVerification says whether every acknowledged commit was found at
// every node, loudly when not.
func printVerification(w io.Writer, v *Verification) {
	switch {
	case v == nil:
		return
	case v.Error != "":
		fmt.Fprintf(w, "  commits     not verified: %s\n", v.Error)
		return
	}
	nodes := slices.Sorted(maps.Keys(v.Nodes))
	unknown := ""
	if v.Unknown > 0 {
		var landed []string
		for _, n := range nodes {
			landed = append(landed, fmt.Sprintf("%s %d", n, v.Nodes[n].UnacknowledgedButPresent))
		}
		unknown = fmt.Sprintf("; %d never acknowledged, landed: %s", v.Unknown, strings.Join(landed, ", "))
	}
	if v.Lost == 0 {
		fmt.Fprintf(w, "  commits     verified: all %d acknowledged commits at %d nodes%s\n", v.Acked, len(nodes), unknown)
	} else {
		fmt.Fprintf(w, "  warning: acknowledged commits LOST (of %d)%s\n", v.Acked, unknown)
		for _, n := range nodes {
			if nv := v.Nodes[n]; nv.Lost > 0 {
				fmt.Fprintf(w, "    %s: %d missing, first %s\n", n, nv.Lost, strings.Join(nv.LostKeys, ", "))
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(v.Skipped)) {
		fmt.Fprintf(w, "    %s not checked: %s\n", n, v.Skipped[n])
	}
}

// printFallbacks says when a synchronous scheme ran asynchronously.
func printFallbacks(w io.Writer, f *SyncFallbacks) {
	if f == nil {
		return
	}
	if f.Count == 0 {
		fmt.Fprintf(w, "  sync        never fell back to asynchronous (polled every %.0f ms)\n", f.ResolutionMs)
		return
	}
	var ps []string
	for _, p := range f.Periods {
		end := "the end"
		if p.EndS != nil {
			end = fmt.Sprintf("%.1f s", *p.EndS)
		}
		ps = append(ps, fmt.Sprintf("%s from %.1f s to %s", p.Node, p.StartS, end))
	}
	fmt.Fprintf(w, "  warning: the synchronous scheme fell back to asynchronous %d times, %.1f s in all (%.0f %% of the measure phase)", f.Count, f.AsyncS, 100*f.AsyncFraction)
	if len(ps) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(ps, "; "))
	}
	fmt.Fprintln(w)
}

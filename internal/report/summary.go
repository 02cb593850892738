package report

import (
	"time"

	"replab/internal/check"
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
	// MachineBound: this machine, not a site's budget nor a link, was the
	// limit in the measure phase — the result measures the machine, not
	// the modelled system. Always written; Machine says what was seen
	// (absent when the machine's counters could not be read, and then
	// MachineBound is false for want of a measure). An aggregate is
	// machine-bound when any repetition was.
	MachineBound bool                    `json:"machine_bound"`
	Machine      *monitor.MachineSummary `json:"machine,omitempty"`

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
	// HA: each fault's HA figures (failover, lost, split brain, rejoin)
	// over its occurrences in the run, or over the repetitions; for
	// clusters whose roles the engine follows.
	HA []fault.HAStats `json:"ha,omitempty"`

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

	// Clients: each [[client]] group's figures over the measure phase
	// (issue 32: users in several regions), by group name.
	Clients map[string]*ClientSummary `json:"clients,omitempty"`

	// Consistency: what the check of the run's history found ([run]
	// history; check.json has every detail).
	Consistency *Consistency `json:"consistency,omitempty"`
	// StaleReads: what reads at each node saw of the writes acknowledged
	// before them, and what the replicas' lag predicts (issue 32;
	// stale_reads.csv lists each stale read).
	StaleReads *StaleReads `json:"stale_reads,omitempty"`

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

// ClientSummary is one [[client]] group's measure phase: where it runs,
// writes and reads, its throughput and commit latency (overall and per
// transaction type), and what its reads saw (stale_reads, counted by the
// group of the process that read).
type ClientSummary struct {
	Site          string                       `json:"site"`
	Writes        string                       `json:"writes"`
	Reads         string                       `json:"reads"`
	Users         int                          `json:"users"`
	Transactions  int64                        `json:"transactions"`
	TPS           float64                      `json:"tps"`
	Errors        int64                        `json:"errors"`
	CommitLatency stats.Percentiles            `json:"commit_latency_ms"`
	Types         map[string]stats.Percentiles `json:"types,omitempty"`
	StaleReads    *check.NodeStale             `json:"stale_reads,omitempty"`
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
	Lost int64 `json:"lost"`
	// LostEverywhere counts the acknowledged commits missing at every node
	// checked: lost by the cluster, not only by a node that fell behind or
	// stopped following (its missing commits are held_elsewhere). A node
	// not checked (Skipped) may still hold some.
	LostEverywhere int64   `json:"lost_everywhere"`
	CheckedAfterS  float64 `json:"checked_after_s"`
	Error          string  `json:"error,omitempty"`
}

// NodeVerification is one node's journal against the driver's.
type NodeVerification struct {
	Present int64 `json:"present"` // journal keys found
	// Lost counts acknowledged commits missing here; LostKeys names the
	// first few ("writer/seq").
	Lost     int64    `json:"lost"`
	LostKeys []string `json:"lost_keys,omitempty"`
	// HeldElsewhere counts the commits missing here that another node
	// checked holds: this node is behind, or stopped following (a standby
	// left on a forked timeline after a failover), rather than the commits
	// being gone.
	HeldElsewhere int64 `json:"held_elsewhere"`
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
	// DivergedRows counts the rows (by primary key) that are not the same
	// at every node, for workloads that can list their rows
	// (workload.RowLister); absent otherwise.
	DivergedRows *int64 `json:"diverged_rows,omitempty"`
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

package driver

import (
	"replab/internal/stats"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what a run measured. Only the measure phase counts in the
// headline figures.
type Result struct {
	Complete       bool    `json:"complete"`
	StopReason     string  `json:"stop_reason,omitempty"`
	Mode           string  `json:"mode"` // "closed" or "open"
	Users          int     `json:"users"`
	TargetRate     float64 `json:"target_rate_per_s,omitempty"`
	MeasureSeconds float64 `json:"measure_s"`
	// With a count (Config.Transactions): the count, and how many of its
	// transactions finished; fewer when the duration ended the measure
	// phase first.
	TransactionsTarget int64   `json:"transactions_target,omitempty"`
	TransactionsDone   int64   `json:"transactions_done,omitempty"`
	Transactions       int64   `json:"transactions"`
	RowsChanged        int64   `json:"rows_changed"`
	TPM                float64 `json:"tpm"`
	TPS                float64 `json:"tps"`
	Errors             int64   `json:"errors"`
	Retries            int64   `json:"retries"`
	// Conflicts counts attempts that lost to a concurrent transaction
	// (serialization failures, deadlocks, certification failures), retried
	// or not.
	Conflicts int64 `json:"conflicts"`
	// Reconnects counts the connections users made again in the measure
	// phase after theirs broke (a node killed, stopped or restarted); the
	// transactions that broke count as errors "connection" (or the
	// server's code), those that found the node still down as "connect".
	Reconnects    int64                  `json:"reconnects,omitempty"`
	CommitLatency stats.Percentiles      `json:"commit_latency_ms"`
	Types         map[string]*TypeResult `json:"types"`
	// Open loop: how late transactions started against the schedule, and
	// how many were skipped because every user was busy. A skipped
	// transaction still counts in CommitLatency (and the series) with the
	// latency it would at least have had: from its intended start to the
	// moment the driver could next send one (a user took the next job, or
	// the run ended); SkippedLatencyMs summarises those alone.
	BehindScheduleMs *stats.Percentiles `json:"behind_schedule_ms,omitempty"`
	Skipped          int64              `json:"skipped,omitempty"`
	SkippedLatencyMs *stats.Percentiles `json:"skipped_latency_ms,omitempty"`
	// With a lag journal: every LagSampleEvery-th transaction of each user
	// was tracked in the measure phase (and cooldown); LagSampleAuto when
	// the driver chose it, for at most LagBudgetPerS tracked per second.
	// 0 when no transaction started in the measure phase.
	LagSampleEvery int      `json:"lag_sample_every,omitempty"`
	LagSampleAuto  bool     `json:"lag_sample_auto,omitempty"`
	LagBudgetPerS  float64  `json:"lag_budget_per_s,omitempty"`
	Series         []Second `json:"-"`
	// Journal has, per user, the outcome of every writing transaction that
	// ran the Journal statement, over the whole run (nil without one).
	Acks []UserAcks `json:"-"`
	// Gaps are the stretches of at least GapMin without a commit, in ns
	// since the driver's start (all phases).
	Gaps []Gap `json:"-"`
	// Hist is the measure phase's latency histogram (µs) for logs.
	Hist *hdrhistogram.Histogram `json:"-"`
	// History counts what was recorded (Config.History); nil without.
	History *HistoryCount `json:"-"`
	// Groups: each group's measure phase (Config.Group), by name.
	Groups map[string]*GroupResult `json:"groups,omitempty"`
	// ProcUser is the user of each process number of the history (a user
	// takes a new one after an info operation): ProcUser[p]; nil without
	// a history.
	ProcUser []int `json:"-"`
	// FenceErrors counts writes after which the commit position could not
	// be taken (Config.Fence), over the whole run; FenceError is the
	// first one's error. The reads after such a write wait for the
	// position before it.
	FenceErrors int64  `json:"fence_errors,omitempty"`
	FenceError  string `json:"fence_error,omitempty"`
	// StartNs is when the run began on Config.Now's clock: second T of
	// Series covers (StartNs + (T-1) s, StartNs + T s].
	StartNs int64 `json:"-"`
}

// UserAcks is what became of one user's journalled transactions, by
// their seq: acknowledged (COMMIT answered OK), or unknown (the COMMIT
// was sent and no answer came: it may or may not have landed). The others
// were rolled back or never sent.
type UserAcks struct {
	Acked   []int64
	Unknown []int64
	// With Config.ConnNode: AckedNs[i] is when Acked[i] was acknowledged
	// (ns since the driver's start, as Gaps), and Spans say which node
	// acknowledged them, a run at a time (none where it could not tell).
	AckedNs []int64
	Spans   []AckSpan
}

// AckSpan is a run of one user's acknowledged commits that one node
// acknowledged: Acked[From:To], the first at FirstNs and the last at
// LastNs (ns since the driver's start, as Gaps).
type AckSpan struct {
	Node            string
	From, To        int
	FirstNs, LastNs int64
}

// TypeResult is one transaction type in the measure phase.
type TypeResult struct {
	Count     int64             `json:"count"`
	Errors    map[string]int64  `json:"errors"` // by engine.ErrorClass.Code
	Retries   int64             `json:"retries"`
	Conflicts int64             `json:"conflicts"`
	LatencyMs stats.Percentiles `json:"latency_ms"`
	hist      *hdrhistogram.Histogram
}

// Second is one second of the run (all phases).
type Second struct {
	T       int // seconds since start
	Phase   string
	Commits int64
	Errors  int64
	P50Ms   float64
	P99Ms   float64
	MaxMs   float64
}

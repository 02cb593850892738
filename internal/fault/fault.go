// Package fault breaks things on a schedule during a run — links (down,
// loss, delay, rate, flapping), nodes (kill, stop, restart, pause) and
// sites (isolated), each fault by its kind (internal/faultkind) — logs every
// fault with its time, whether the schedule or a second shell caused it,
// and measures the run around each: throughput and commit latency before,
// during and after, the time to recover, the lag it caused at each
// replica.
package fault

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Event is one line of faults.csv: a fault applied or healed.
type Event struct {
	// Fault is the [[fault]]'s index in the spec, from 0; -1 for one made
	// from a second shell (replab fault, replab link set).
	Fault  int     `json:"fault"`
	What   string  `json:"what"`   // "link primary<->asia set down", "node e1 kill"
	Action string  `json:"action"` // ActionApply or ActionHeal
	AtS    float64 `json:"at_s"`   // seconds since the measure phase began (negative in the warmup)
	Err    string  `json:"error,omitempty"`
}

// Event actions.
const (
	ActionApply = "apply"
	ActionHeal  = "heal"
)

// Window is the run's throughput and commit latency over [FromS, ToS),
// seconds since the measure phase began, from the driver's per-second
// series.
type Window struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	TPS   float64 `json:"tps"` // commits per second, mean over the window's seconds
	// P99Ms is the worst second's 99th percentile of commit latency in the
	// window; MaxMs the worst latency.
	P99Ms  float64 `json:"commit_p99_ms"`
	MaxMs  float64 `json:"commit_max_ms"`
	Errors int64   `json:"errors"`
}

// Summary is one fault in summary.json's faults.
type Summary struct {
	Fault int     `json:"fault"` // as in Event
	What  string  `json:"what"`
	AtS   float64 `json:"at_s"`
	// HealS is when it was healed (seconds since the measure phase
	// began); absent when it was not within the run.
	HealS *float64 `json:"heal_s,omitempty"`
	// Before is the span before the fault (at most 10 s, not before the
	// warmup nor the heal of a fault that ended before it began); During from the fault
	// to its heal (or 1 s for a fault that is not healed); After as long
	// as Before from the heal (or from the end of During).
	Before Window `json:"before"`
	During Window `json:"during"`
	After  Window `json:"after"`
	// RecoverS is how long after the heal (or the fault, when it is not
	// healed) the throughput was first back within 10 % of Before's, for
	// a whole second; absent when it was not within the run.
	RecoverS *float64 `json:"recover_s,omitempty"`
	// UnavailableS is the longest time without a single commit that
	// overlaps the fault's span (from the fault until After ends): how
	// long clients could not write (a dead primary until its standby was
	// promoted and the clients found it). The driver records stretches of
	// 250 ms and more; with think time or a slow open loop, compare it with
	// the time between commits before.
	UnavailableS float64 `json:"unavailable_s,omitempty"`
	// LagPeakMs is each replica's worst per-second lag p99 from the fault
	// until the next fault (or the end of the watch, the catch-up after
	// the run included): the commits a fault held back become visible,
	// and get their lag, only once the replica is back. LagBeforeMs is
	// the worst over Before.
	LagPeakMs   map[string]float64 `json:"lag_peak_ms,omitempty"`
	LagBeforeMs map[string]float64 `json:"lag_before_ms,omitempty"`
	// BacklogPeak is each replica's largest backlog as the engine reports
	// it (bytes of WAL not yet replayed, transactions, …: BacklogUnit) from
	// the fault until After ends: what built up.
	BacklogPeak map[string]float64 `json:"backlog_peak,omitempty"`
	BacklogUnit map[string]string  `json:"backlog_unit,omitempty"`
	Err         string             `json:"error,omitempty"` // applying or healing it failed
	// HA is what the fault did to a cluster whose roles the engine
	// follows (an HA manager's, engine.RoleWatcher): failover, lost
	// commits, split brain, rejoin (ha.go).
	HA *HA `json:"ha,omitempty"`
}

var csvHeader = []string{"at_s", "fault", "action", "what", "error"}

// WriteCSV writes events as faults.csv.
func WriteCSV(w io.Writer, events []Event) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, e := range events {
		if err := cw.Write([]string{strconv.FormatFloat(e.AtS, 'f', 3, 64), strconv.Itoa(e.Fault), e.Action, e.What, e.Err}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads faults.csv back.
func ReadCSV(r io.Reader) ([]Event, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !slices.Equal(recs[0], csvHeader) {
		return nil, fmt.Errorf("not a faults.csv: the first line is not %v", csvHeader)
	}
	var out []Event
	for i, rec := range recs[1:] {
		at, err1 := strconv.ParseFloat(rec[0], 64)
		f, err2 := strconv.Atoi(rec[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("faults.csv line %d: bad number", i+2)
		}
		out = append(out, Event{AtS: at, Fault: f, Action: rec[2], What: rec[3], Err: rec[4]})
	}
	return out, nil
}

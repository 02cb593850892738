package mariadb

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A semi-synchronous primary that gets no acknowledgement within its
// timeout switches itself to asynchronous replication and back when a
// replica catches up. The server counts the switches
// (Rpl_semi_sync_master_no_times) but keeps no durations: semiTracker
// polls the primary's status to time each period spent asynchronous.

// semiPoll is how often the tracker reads the primary's status: the
// resolution of the fallback durations it reports.
const semiPoll = 100 * time.Millisecond

// SemisyncReport is what a semi-synchronous primary did so far.
type SemisyncReport struct {
	// On: Rpl_semi_sync_master_status at the last poll (false: the primary
	// runs asynchronously now).
	On bool `json:"on"`
	// Fallbacks is the server's count of switches to asynchronous
	// (Rpl_semi_sync_master_no_times, summed over the primary's restarts).
	Fallbacks int64 `json:"fallbacks"`
	// Periods are the periods the tracker saw the primary asynchronous; a
	// period still going on has a zero End.
	Periods []FallbackPeriod `json:"periods,omitempty"`
	// AsyncMs is the time spent asynchronous over all periods, up to now.
	AsyncMs float64 `json:"async_ms"`
	// YesTx and NoTx count commits acknowledged by a replica and commits
	// that were not (Rpl_semi_sync_master_yes_tx, _no_tx).
	YesTx int64 `json:"yes_tx"`
	NoTx  int64 `json:"no_tx"`
	// Clients is the number of semi-synchronous replicas connected.
	Clients int64 `json:"clients"`
}

// FallbackPeriod is one period without semi-synchronous acknowledgement.
type FallbackPeriod struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
}

type semiTracker struct {
	n  *node
	mu sync.Mutex
	r  SemisyncReport
	ok bool // a status was read at least once
	// The server's counters start from zero when the primary restarts:
	// raw holds the last values read, base what earlier runs counted.
	raw, base [3]int64 // no_times, yes_tx, no_tx
}

func newSemiTracker(n *node) *semiTracker { return &semiTracker{n: n} }

func (t *semiTracker) run(ctx context.Context) {
	tick := time.NewTicker(semiPoll)
	defer tick.Stop()
	for {
		t.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// poll reads the status once; a primary that is down leaves the report
// as it was.
func (t *semiTracker) poll(ctx context.Context) {
	db, err := t.n.db()
	if err != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := globalStatus(pctx, db, "Rpl_semi_sync_master_%")
	if err != nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	on := st["Rpl_semi_sync_master_status"] == "ON"
	num := func(k string) int64 { v, _ := strconv.ParseInt(st[k], 10, 64); return v }
	raw := [3]int64{num("Rpl_semi_sync_master_no_times"), num("Rpl_semi_sync_master_yes_tx"), num("Rpl_semi_sync_master_no_tx")}
	if raw[0] < t.raw[0] || raw[1] < t.raw[1] || raw[2] < t.raw[2] { // restarted
		for i := range raw {
			t.base[i] += t.raw[i]
		}
	}
	t.raw = raw
	t.r.Fallbacks, t.r.YesTx, t.r.NoTx = t.base[0]+raw[0], t.base[1]+raw[1], t.base[2]+raw[2]
	t.r.Clients = num("Rpl_semi_sync_master_clients")
	last := len(t.r.Periods) - 1
	switch {
	case !on && (last < 0 || !t.r.Periods[last].End.IsZero()):
		t.r.Periods = append(t.r.Periods, FallbackPeriod{Start: now})
	case on && last >= 0 && t.r.Periods[last].End.IsZero():
		t.r.Periods[last].End = now
	}
	t.r.On, t.ok = on, true
}

func (t *semiTracker) report() (SemisyncReport, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.r
	r.Periods = append([]FallbackPeriod(nil), t.r.Periods...)
	r.AsyncMs = 0
	for _, p := range r.Periods {
		end := p.End
		if end.IsZero() {
			end = time.Now()
		}
		r.AsyncMs += float64(end.Sub(p.Start)) / 1e6
	}
	return r, t.ok
}

// Semisync reports the primary's fallbacks to asynchronous replication;
// false when the scheme is not semisync or no status was read yet.
func (c *cluster) Semisync() (SemisyncReport, bool) {
	if c.semi == nil {
		return SemisyncReport{}, false
	}
	return c.semi.report()
}

// Semisyncer is what a semisync cluster offers the runner: the fallbacks
// so far.
type Semisyncer interface {
	Semisync() (SemisyncReport, bool)
}

var _ Semisyncer = (*cluster)(nil)

// globalStatus reads SHOW GLOBAL STATUS LIKE pattern as a map.
func globalStatus(ctx context.Context, db *sql.DB, like string) (map[string]string, error) {
	// SHOW cannot take placeholders: like is a constant of this package.
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE "+sqlString(like))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		// MariaDB spells the names in mixed case; keep its spelling but be
		// safe against a lower-case build.
		out[k] = v
		if lk := strings.ToLower(k); lk != k {
			out[lk] = v
		}
	}
	return out, rows.Err()
}

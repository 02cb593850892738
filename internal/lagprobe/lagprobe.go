// Package lagprobe measures replication lag per transaction and per
// replica. Every tracked transaction bumps its writer's sequence number in
// the table replab_lag; a watcher per replica polls that table from the
// replica's own site on a precise timer while a tracked transaction could
// have become visible there, and a change's lag is the end of the first
// poll that sees it minus the time its COMMIT was sent.
package lagprobe

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/engine"
	"replab/internal/linkem/emu"
)

// TableName is the probe's table: one row per writer.
const TableName = "replab_lag"

// DefaultInterval is how often a watcher polls its replica by default.
const DefaultInterval = time.Millisecond

// Config sets up a Probe.
type Config struct {
	// Writers is the number of writers (users); writer ids are 0..Writers-1.
	Writers int
	// Interval between poll starts; default DefaultInterval.
	Interval time.Duration
	// Now is the clock in nanoseconds; default emu.Now (CLOCK_MONOTONIC,
	// the clock of every link in a lab). Injectable for tests; it must
	// advance at the rate of real time.
	Now func() int64
	// Start is where second 0 of Result.Series begins, on Now's clock;
	// default Now() when New is called.
	Start int64
	// PollAlways polls every Interval for the whole watch. By default a
	// watcher polls only while a transaction it has not seen yet could be
	// visible (see Watch), which is what keeps the probe cheap.
	PollAlways bool
}

// Probe is one run's lag probe. Its methods are safe for concurrent use,
// except that each Writer belongs to one goroutine.
type Probe struct {
	now      func() int64
	realTime bool // now is emu.Now: deadlines can be slept on directly
	interval int64
	always   bool
	start    int64
	writers  []*Writer

	mu       sync.Mutex // serialises registration
	replicas atomic.Pointer[[]*replica]

	// Test hooks: sleep waits for a deadline on now's clock (false when
	// ctx ended); onLag sees every recorded lag in exact nanoseconds.
	sleep func(ctx context.Context, deadline int64) bool
	onLag func(replica string, writer int, seq, lagNs int64)
}

// New creates a probe for cfg.Writers writers.
func New(cfg Config) *Probe {
	if cfg.Writers < 0 {
		cfg.Writers = 0
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	p := &Probe{now: cfg.Now, interval: int64(cfg.Interval), always: cfg.PollAlways}
	if p.now == nil {
		p.now = emu.Now
		p.realTime = true
	}
	p.start = cfg.Start
	if p.start == 0 {
		p.start = p.now()
	}
	p.writers = make([]*Writer, cfg.Writers)
	for i := range p.writers {
		p.writers[i] = &Writer{p: p, id: i, curIdx: -1}
	}
	p.replicas.Store(&[]*replica{})
	return p
}

// Writers is the number of writers.
func (p *Probe) Writers() int { return len(p.writers) }

// Now reads the probe's clock: use it for the COMMIT-sent times given to
// Writer.Sending.
func (p *Probe) Now() int64 { return p.now() }

// Interval is the configured poll interval.
func (p *Probe) Interval() time.Duration { return time.Duration(p.interval) }

// Writer returns writer i's journal (0 ≤ i < Writers).
func (p *Probe) Writer(i int) *Writer { return p.writers[i] }

// Table is replab_lag, for engine.Schema: one row per writer holding the
// sequence number of its last committed transaction attempt.
func (p *Probe) Table() engine.Table {
	return engine.Table{
		Name:       TableName,
		Everywhere: true, // partial replicas need it too, or their lag is unknowable
		Create: map[string]string{
			"postgres": "CREATE TABLE " + TableName + " (writer int PRIMARY KEY, seq bigint NOT NULL)",
			"mysql":    "CREATE TABLE " + TableName + " (writer INT PRIMARY KEY, seq BIGINT NOT NULL) ENGINE=InnoDB",
		},
	}
}

// seedBatch is how many rows one seed statement inserts.
const seedBatch = 1000

// SeedStatements (re)set one row per writer to seq 0, in batches. Run them
// at the source(s) and let them replicate (engine.Cluster.WaitFlowing)
// before the watchers start. dialect is "postgres" or "mysql".
func (p *Probe) SeedStatements(dialect string) []string {
	var tail string
	switch dialect {
	case "postgres":
		tail = " ON CONFLICT (writer) DO UPDATE SET seq = 0"
	case "mysql":
		tail = " ON DUPLICATE KEY UPDATE seq = 0"
	default:
		panic(unknownDialect(dialect))
	}
	var out []string
	for lo := 0; lo < len(p.writers); lo += seedBatch {
		var b strings.Builder
		b.WriteString("INSERT INTO " + TableName + " (writer, seq) VALUES ")
		for w := lo; w < min(lo+seedBatch, len(p.writers)); w++ {
			if w > lo {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, 0)", w)
		}
		b.WriteString(tail)
		out = append(out, b.String())
	}
	return out
}

// UpdateStatement is the statement every transaction runs once, with the
// arguments (seq, writer): seq from Writer.Next.
func (p *Probe) UpdateStatement(dialect string) string {
	switch dialect {
	case "postgres":
		return "UPDATE " + TableName + " SET seq = $1 WHERE writer = $2"
	case "mysql":
		return "UPDATE " + TableName + " SET seq = ? WHERE writer = ?"
	}
	panic(unknownDialect(dialect))
}

// SelectStatement is what a Querier runs at a replica: (writer, seq) rows.
const SelectStatement = "SELECT writer, seq FROM " + TableName

func unknownDialect(d string) string {
	return fmt.Sprintf("lagprobe: unknown SQL dialect %q (postgres, mysql)", d)
}

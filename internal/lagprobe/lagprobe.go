// Package lagprobe measures replication lag per transaction and per
// replica, by one of two methods. With stamps, every tracked transaction
// bumps its writer's sequence number (the engine's lag stamps: for SQL
// engines the table replab_lag), and a watcher per replica reads the
// stamps from the replica's own site on a precise timer while a tracked
// transaction could have become visible there. With positions (where the
// engine has them, engine.Positions), every transaction's commit position
// is recorded as its COMMIT returns, and a watcher per replica polls the
// position the replica has applied. Either way a change's lag is the end
// of the first read that shows it minus the time its COMMIT was sent.
package lagprobe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/clock"
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
	// Now is the clock in nanoseconds; default clock.Now (CLOCK_MONOTONIC,
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
	// OnLag, if set, sees every lag recorded (measured transactions), from
	// the replica's watcher goroutine: live metrics. It must be quick.
	OnLag func(replica string, lagNs int64)
}

// Probe is one run's lag probe. Its methods are safe for concurrent use,
// except that each Writer belongs to one goroutine.
type Probe struct {
	now      func() int64
	realTime bool // now is clock.Now: deadlines can be slept on directly
	interval int64
	always   bool
	start    int64
	writers  []*Writer
	pwriters []*PosWriter
	keep     int // polls a position watcher remembers (0: defaultKeep)

	mu        sync.Mutex // serialises registration
	replicas  atomic.Pointer[[]*replica]
	preplicas atomic.Pointer[[]*posReplica]

	// Test hooks: sleep waits for a deadline on now's clock (false when
	// ctx ended); idle runs when a watcher has nothing to look for, just
	// before it waits for a COMMIT to be sent (a test on a virtual clock
	// moves on to its next transaction there); onLag sees every recorded
	// lag in exact nanoseconds.
	sleep func(ctx context.Context, deadline int64) bool
	idle  func()
	onLag func(replica string, writer int, seq, lagNs int64)
	// onSent sees every lag the position method records with its
	// transaction's COMMIT-sent time (a test's key across methods).
	onSent func(replica string, writer int, sent, lagNs int64)
	// onPoll sees every successful poll's start and end: a transaction
	// seen by a poll became visible after the previous poll's start.
	onPoll func(replica string, start, end int64)
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
		p.now = clock.Now
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
	p.pwriters = make([]*PosWriter, cfg.Writers)
	for i := range p.pwriters {
		p.pwriters[i] = &PosWriter{p: p, id: i, sent: -1, curIdx: -1}
	}
	p.replicas.Store(&[]*replica{})
	p.preplicas.Store(&[]*posReplica{})
	if f := cfg.OnLag; f != nil {
		p.onLag = func(r string, _ int, _, lag int64) { f(r, lag) }
	}
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

package lagprobe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"replab/internal/clock"
)

// The position method: every writing transaction's commit position (the
// engine's engine.Positions: a WAL LSN, a GTID's sequence number, a
// seqno) against each replica's applied position, polled every interval
// while a commit is in flight or not yet seen there, whatever the load:
// one poll per replica and interval, not a statement and a dozen polls per
// tracked transaction as with stamps. join.go dates the commits.

// PositionQuerier reads a replica's applied position (engine.PositionReader
// is one). Connect it from the replica's own site. One goroutine calls it.
type PositionQuerier interface {
	Applied(ctx context.Context) (int64, error)
}

// PosWriter is one writer's commits for the position method. Sending and
// Done are called from the writer's goroutine, in that order for each
// transaction.
type PosWriter struct {
	p  *Probe
	id int

	// Owned by the writer's goroutine.
	sent   int64 // the COMMIT in flight was sent then; -1: none
	cur    *posChunk
	curIdx int64
	freed  int64 // chunks below this index are released

	// Read by the watchers.
	inflight atomic.Bool  // a COMMIT was sent and has not returned
	n        atomic.Int64 // commits in the log (measured ones that committed)
	dir      atomic.Pointer[posDir]

	_ [64]byte // keep writers' hot fields off each other's cache lines
}

// The log: chunks of commits indexed from 0, in a directory the writer
// replaces when it grows; a commit is written before n counts it.
type posEntry struct{ sent, pos int64 }

type posChunk [chunkLen]posEntry

type posDir struct {
	chunks []atomic.Pointer[posChunk]
}

// PosWriter returns writer i's position journal (0 ≤ i < Writers).
func (p *Probe) PosWriter(i int) *PosWriter { return p.pwriters[i] }

// ID is the writer's number.
func (w *PosWriter) ID() int { return w.id }

// Next says the writer follows its next transaction: always (a sampling
// journal in a benchmark may not).
func (w *PosWriter) Next() bool { return true }

// Sending records that the writer's COMMIT is about to be sent, at time
// at (Probe.Now).
func (w *PosWriter) Sending(at int64) {
	w.sent = at
	w.inflight.Store(true)
	// Wake watchers that wait for something to look for (the store above
	// and the load of idle pair with the watcher's store of idle and its
	// look at inflight, as in Writer.Sending).
	for _, r := range *w.p.preplicas.Load() {
		if r.idle.Load() {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// Done records how the COMMIT sent returned: ok, at position pos (0 or
// less: the position is unknown), or not. Only measured transactions that
// committed are kept; a Done without a Sending is ignored.
func (w *PosWriter) Done(ok bool, pos int64, measured bool) {
	if w.sent < 0 {
		return
	}
	if ok && measured {
		w.append(posEntry{sent: w.sent, pos: max(pos, 0)})
	}
	w.sent = -1
	w.inflight.Store(false) // after the append: a watcher never sees neither
}

func (w *PosWriter) append(e posEntry) {
	k := w.n.Load()
	if k&chunkMask == 0 {
		w.addChunk(k >> chunkBits)
	}
	w.cur[k&chunkMask] = e
	w.n.Store(k + 1)
}

// addChunk starts chunk i, first releasing the chunks every position
// watcher has read.
func (w *PosWriter) addChunk(i int64) {
	d := w.dir.Load()
	if low := w.p.posLowWater(w.id); low > 0 && d != nil {
		for w.freed < i && (w.freed+1)<<chunkBits <= low {
			d.chunks[w.freed].Store(nil)
			w.freed++
		}
	}
	if d == nil || int(i) >= len(d.chunks) {
		n := 16
		if d != nil {
			n = 2 * len(d.chunks)
		}
		nd := &posDir{chunks: make([]atomic.Pointer[posChunk], n)}
		if d != nil {
			for j := range d.chunks {
				nd.chunks[j].Store(d.chunks[j].Load())
			}
		}
		w.dir.Store(nd)
		d = nd
	}
	c := new(posChunk)
	d.chunks[i].Store(c)
	w.cur, w.curIdx = c, i
}

// entry reads commit k (< n) for a watcher; false once released.
func (w *PosWriter) entry(k int64) (posEntry, bool) {
	d := w.dir.Load()
	if d == nil || k>>chunkBits >= int64(len(d.chunks)) {
		return posEntry{}, false
	}
	c := d.chunks[k>>chunkBits].Load()
	if c == nil {
		return posEntry{}, false
	}
	return c[k&chunkMask], true
}

// posLowWater is how many of writer w's commits every position watcher
// has read; 0 while none watches w.
func (p *Probe) posLowWater(w int) int64 {
	low := int64(-1)
	for _, r := range *p.preplicas.Load() {
		if !r.skip[w] {
			if c := r.cursor[w].Load(); low < 0 || c < low {
				low = c
			}
		}
	}
	return max(low, 0)
}

// posReplica is one replica watched by position.
type posReplica struct {
	name string
	p    *Probe
	skip []bool

	cursor []atomic.Int64 // per writer: commits read from its log
	done   chan struct{}
	err    error
	ready  atomic.Bool
	idle   atomic.Bool
	wake   chan struct{}

	mu         sync.Mutex
	j          *join
	out        []sighting
	before     int64 // seen by the first poll: no lag
	unpos      int64
	trunc      int64
	forgotten  int64
	waits      int64
	advancedAt int64
	lastSent   int64
	applied    int64 // the last position read
	lagStats
}

func (p *Probe) registerPos(name string, skip func(writer int) bool) (*posReplica, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watched(name) {
		return nil, fmt.Errorf("lag probe: replica %s is already watched", name)
	}
	n := len(p.pwriters)
	r := &posReplica{
		name:     name,
		p:        p,
		skip:     make([]bool, n),
		cursor:   make([]atomic.Int64, n),
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		j:        newJoin(p.keep),
		lagStats: newLagStats(p.start),
	}
	for w := range r.skip {
		r.skip[w] = skip != nil && skip(w)
	}
	old := *p.preplicas.Load()
	rs := append(append([]*posReplica(nil), old...), r)
	p.preplicas.Store(&rs)
	return r, nil
}

// watched says whether a replica of either method has name; p.mu held.
func (p *Probe) watched(name string) bool {
	for _, r := range *p.replicas.Load() {
		if r.name == name {
			return true
		}
	}
	for _, r := range *p.preplicas.Load() {
		if r.name == name {
			return true
		}
	}
	return false
}

// WatchPositions polls one replica's applied position every Interval
// until ctx ends, then returns nil, and dates every commit of the
// PosWriters by it: a commit is visible at the end of the first poll at
// or past its position. It polls while a COMMIT is in flight or a commit
// is not yet seen, and waits otherwise. The first poll must succeed (what
// it shows counts as VisibleBeforeWatch); later failures are counted and
// retried with backoff up to 100 ms. Start it before the writers' measured
// phase; o.Skip leaves out writers that write at this node.
func (p *Probe) WatchPositions(ctx context.Context, name string, q PositionQuerier, o WatchOptions) (err error) {
	r, err := p.registerPos(name, o.Skip)
	if err != nil {
		return err
	}
	defer func() {
		r.err = err
		close(r.done)
	}()
	sleep := p.sleep
	if sleep == nil {
		defer clock.LockThread(watcherNice)()
		s := clock.NewSleeper()
		if p.realTime {
			sleep = s.UntilCtx
		} else {
			sleep = func(ctx context.Context, deadline int64) bool {
				return s.UntilCtx(ctx, clock.Now()+deadline-p.now())
			}
		}
	}
	next := p.now()
	fails := 0
	chained := false
	for {
		start := p.now()
		pos, qerr := q.Applied(ctx)
		end := p.now()
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case qerr != nil && !r.ready.Load():
			return fmt.Errorf("lag probe: replica %s: first poll: %w", name, qerr)
		case qerr != nil:
			r.mu.Lock()
			r.failed(qerr)
			r.mu.Unlock()
			fails++
			next = start + max(p.interval, min(p.interval<<min(fails, 20), int64(maxBackoff)))
		default:
			fails = 0
			r.observe(start, end, pos, chained)
			next += p.interval
		}
		if now := p.now(); next < now {
			next = now
		}
		chained = qerr == nil // the interval after a failure is the backoff's
		if qerr == nil && !r.outstanding() {
			// Nothing in flight, nothing unseen: wait for a COMMIT.
			r.idle.Store(true)
			if r.outstanding() {
				r.idle.Store(false)
			} else {
				r.mu.Lock()
				r.waits++
				r.mu.Unlock()
				if p.idle != nil {
					p.idle()
				}
				select {
				case <-r.wake:
				case <-ctx.Done():
					r.idle.Store(false)
					return nil
				}
				r.idle.Store(false)
				chained = false
				if now := p.now(); next < now {
					next = now
				}
			}
		}
		if !sleep(ctx, next) {
			return nil
		}
	}
}

// observe takes one successful poll: the commits that returned since the
// last one, then what the poll shows.
func (r *posReplica) observe(start, end, pos int64, chained bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.countPoll(start, end, chained)
	if f := r.p.onPoll; f != nil {
		f(r.name, start, end)
	}
	r.applied = pos
	r.ingest()
	r.out = r.j.poll(end, pos, r.out[:0])
	for _, s := range r.out {
		r.sighted(s)
	}
	r.ready.Store(true)
}

// ingest reads the writers' new commits into the join; r.mu held.
func (r *posReplica) ingest() {
	for w, wr := range r.p.pwriters {
		if r.skip[w] {
			continue
		}
		k, n := r.cursor[w].Load(), wr.n.Load()
		for ; k < n; k++ {
			e, ok := wr.entry(k)
			switch {
			case !ok:
				r.forgotten++
				continue
			case e.pos <= 0:
				r.unpos++
				continue
			}
			switch s, how := r.j.add(posCommit{sent: e.sent, pos: e.pos, writer: w, seq: k + 1}); how {
			case seen:
				r.sighted(s)
			case truncated:
				r.trunc++
			}
		}
		r.cursor[w].Store(n)
	}
}

// sighted records one commit's visibility; r.mu held.
func (r *posReplica) sighted(s sighting) {
	if s.first {
		r.before++
		return
	}
	lag := max(s.at-s.c.sent, 0)
	r.add(lag)
	r.lastSent = max(r.lastSent, s.c.sent)
	r.advancedAt = max(r.advancedAt, s.at)
	if f := r.p.onLag; f != nil {
		f(r.name, s.c.writer, s.c.seq, lag)
	}
	if f := r.p.onSent; f != nil {
		f(r.name, s.c.writer, s.c.sent, lag)
	}
}

// outstanding says whether a commit is in flight, unread or unseen.
func (r *posReplica) outstanding() bool {
	for w, wr := range r.p.pwriters {
		if !r.skip[w] && (wr.inflight.Load() || r.cursor[w].Load() < wr.n.Load()) {
			return true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.j.pending() > 0
}

// caughtUp says whether every commit so far is seen here, and if not who
// is behind.
func (r *posReplica) caughtUp() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ingest()
	if n := r.j.pending(); n > 0 {
		return false, fmt.Sprintf("replica %s is at position %d, %d commits not seen (the first at %d)", r.name, r.applied, n, r.j.wait[0].pos)
	}
	return true, ""
}

func (r *posReplica) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ingest()
	res := Result{
		Replica:            r.name,
		Method:             MethodPositions,
		VisibleBeforeWatch: r.before,
		NotVisibleAtEnd:    int64(r.j.pending()),
		Unpositioned:       r.unpos,
		Truncated:          r.trunc,
		Forgotten:          r.forgotten,
		IdleWaits:          r.waits,
		CatchUpNs:          max(r.advancedAt-r.lastSent, 0),
	}
	for w, wr := range r.p.pwriters {
		if !r.skip[w] {
			res.Tracked += wr.n.Load()
		}
	}
	if res.NotVisibleAtEnd > 0 {
		res.CatchUpNs = -1
	}
	r.fill(&res)
	return res
}

// Package gendata makes a workload's initial data deterministic and loads
// it in chunks. Every row is a function of (seed, table, owner id): the
// rows of one owner (a person, a customer, or a reference row itself)
// come from a PCG stream seeded with those three, and how many rows an
// owner has from a hash of them, so a workload can count its rows without
// making them and load its tables in any order.
package gendata

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"replab/internal/engine"
)

// Today is the data's fixed "now", so data does not depend on the clock.
var Today = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Gen hands out the streams; one per loading goroutine.
type Gen struct {
	seed uint64
	pcg  rand.PCG
	r    *rand.Rand
}

// New makes a Gen for the data set of seed.
func New(seed uint64) *Gen {
	g := &Gen{seed: seed}
	g.r = rand.New(&g.pcg)
	return g
}

// At reseeds the stream for one owner (id) of one table (salt) and
// returns it; it is valid until the next call.
func (g *Gen) At(salt uint64, id int64) *rand.Rand {
	g.pcg.Seed(Hash(g.seed, salt, id), mix(g.seed+salt))
	return g.r
}

// Hash is a well-mixed 64-bit function of (seed, salt, id).
func Hash(seed, salt uint64, id int64) uint64 {
	return mix(seed ^ salt ^ mix(uint64(id)+0x9e3779b97f4a7c15))
}

// Between is lo..hi from a hash of (seed, salt, id).
func Between(seed, salt uint64, id int64, lo, hi int) int {
	return lo + int(Hash(seed, salt, id)%uint64(hi-lo+1))
}

// mix is SplitMix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Salt names a stream.
func Salt(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// Table is one table of a data set: the rows of owners 1..Owners.
type Table struct {
	Name    string
	Columns []string
	Owners  int64
	// Count is how many rows owner id has (nil: one); Rows makes them, in
	// the order of Columns.
	Count func(id int64) int
	Rows  func(id int64, n int) [][]any
}

// ProgressEvery is how often Load reports, in rows.
const ProgressEvery = 5000

// Load loads tables in order through l.Copy, chunk owners per statement —
// so that a large load commits (and replicates) as it goes rather than all
// at the end —, checks that every row sent was stored, and calls progress
// with the rows loaded so far every ProgressEvery rows and at the end.
func Load(ctx context.Context, l engine.Loader, tables []Table, chunk int64, progress func(rows int64)) error {
	p := &counter{report: progress}
	for _, t := range tables {
		for first := int64(1); first <= t.Owners; first += chunk {
			src := &source{ctx: ctx, t: t, next: first, last: min(first+chunk-1, t.Owners), progress: p}
			n, err := l.Copy(ctx, t.Name, t.Columns, src)
			if err == nil {
				err = src.err
			}
			if err != nil {
				return fmt.Errorf("load %s: %w", t.Name, err)
			}
			if n != src.rows {
				return fmt.Errorf("load %s: %d rows stored of %d sent", t.Name, n, src.rows)
			}
		}
	}
	p.flush()
	return nil
}

// counter reports rows loaded so far, every ProgressEvery rows.
type counter struct {
	report   func(rows int64)
	rows     int64
	reported int64
}

func (c *counter) add() {
	c.rows++
	if c.rows-c.reported >= ProgressEvery {
		c.flush()
	}
}

func (c *counter) flush() {
	if c.report != nil && c.rows != c.reported {
		c.report(c.rows)
	}
	c.reported = c.rows
}

// source is one chunk of one table as an engine.RowSource: the rows of
// owners next..last.
type source struct {
	ctx      context.Context
	t        Table
	next     int64
	last     int64
	pending  [][]any
	row      []any
	rows     int64
	err      error
	progress *counter
}

// Next implements engine.RowSource.
func (s *source) Next() bool {
	for len(s.pending) == 0 {
		if s.next > s.last || s.err != nil {
			return false
		}
		if s.next%1000 == 0 {
			if s.err = s.ctx.Err(); s.err != nil {
				return false
			}
		}
		id := s.next
		s.next++
		n := 1
		if s.t.Count != nil {
			n = s.t.Count(id)
		}
		s.pending = s.t.Rows(id, n)
		if len(s.pending) != n {
			s.err = fmt.Errorf("owner %d: %d rows made, %d counted (a bug)", id, len(s.pending), n)
			return false
		}
	}
	s.row, s.pending = s.pending[0], s.pending[1:]
	s.rows++
	s.progress.add()
	return true
}

// Values implements engine.RowSource.
func (s *source) Values() ([]any, error) { return s.row, nil }

// Err implements engine.RowSource.
func (s *source) Err() error { return s.err }

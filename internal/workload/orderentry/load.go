package orderentry

import (
	"context"
	"fmt"
	"strings"

	"replab/internal/workload"
)

const (
	// chunkOwners is how many owners (customers, products) one Copy
	// takes: each is one bulk statement, so a large load commits (and
	// replicates) as it goes rather than all at the end.
	chunkOwners = 20_000
	// progressEvery is how often Load reports, in rows.
	progressEvery = 5000
)

// Load implements workload.Workload: warehouses and products, then the
// customers' tables, in chunks through l.Copy, then ANALYZE.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(rows int64)) error {
	g := newGen(w)
	p := &counter{report: progress}
	for _, t := range tables {
		owners := t.owners(w)
		for first := int64(1); first <= owners; first += chunkOwners {
			src := &source{ctx: ctx, g: g, t: t, next: first, last: min(first+chunkOwners-1, owners), progress: p}
			n, err := l.Copy(ctx, t.name, t.columns(), src)
			if err == nil {
				err = src.err
			}
			if err != nil {
				return fmt.Errorf("load %s: %w", t.name, err)
			}
			if n != src.rows {
				return fmt.Errorf("load %s: %d rows stored of %d sent", t.name, n, src.rows)
			}
		}
	}
	p.flush()
	return l.Exec(ctx, w.analyze())
}

// analyze updates the planner's statistics after loading.
func (w *Workload) analyze() string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.name
	}
	if w.dialect == "mysql" {
		return "ANALYZE TABLE " + strings.Join(names, ", ")
	}
	return "ANALYZE " + strings.Join(names, ", ")
}

// counter reports rows loaded so far, every progressEvery rows.
type counter struct {
	report   func(rows int64)
	rows     int64
	reported int64
}

func (c *counter) add() {
	c.rows++
	if c.rows-c.reported >= progressEvery {
		c.flush()
	}
}

func (c *counter) flush() {
	if c.report != nil && c.rows != c.reported {
		c.report(c.rows)
	}
	c.reported = c.rows
}

// source is one chunk of one table as a workload.RowSource: the rows of
// owners next..last.
type source struct {
	ctx      context.Context
	g        *gen
	t        *table
	next     int64
	last     int64
	pending  [][]any
	row      []any
	rows     int64
	err      error
	progress *counter
}

// Next implements workload.RowSource.
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
		if s.t.count != nil {
			n = s.t.count(s.g.w, id)
		}
		s.pending = s.t.rows(s.g, s.g.at(s.t.salt, id), id, n)
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

// Values implements workload.RowSource.
func (s *source) Values() ([]any, error) { return s.row, nil }

// Err implements workload.RowSource.
func (s *source) Err() error { return s.err }

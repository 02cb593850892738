package kvinsert

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"replab/internal/engine"
	"replab/internal/workload"
)

const (
	// chunkRows is how many rows one Copy takes: one bulk statement each,
	// so a large preload commits (and replicates) as it goes.
	chunkRows = 50_000
	// progressEvery is how often Load reports, in rows.
	progressEvery = 5000
	// preloadSalt separates the preload's stream from other uses of the seed.
	preloadSalt = 0x6b762d7072656c64 // "kv-preld"
)

// Load implements workload.Workload: preload rows, deterministic from the
// seed. Row i's key ends in mix(base + i), unique for every i; its
// leading bytes and its value come from one PCG stream seeded from the
// seed.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(rows int64)) error {
	if w.preload == 0 {
		return nil
	}
	src := &preloadSource{
		w:        w,
		r:        rand.New(rand.NewPCG(mix(w.seed^preloadSalt), preloadSalt)),
		base:     mix(w.seed + preloadSalt),
		ctx:      ctx,
		progress: progress,
	}
	var done int64
	for done < w.preload {
		src.last = min(done+chunkRows, w.preload)
		n, err := l.Copy(ctx, "kv", []string{"k", "v"}, src)
		if err == nil {
			err = src.err
		}
		if err != nil {
			return fmt.Errorf("load kv: %w", err)
		}
		if n != src.last-done {
			return fmt.Errorf("load kv: %d rows stored of %d sent", n, src.last-done)
		}
		done = src.last
	}
	if progress != nil && src.reported != done {
		progress(done)
	}
	if w.dialect == engine.KV {
		return nil // a key-value store has no statistics to gather
	}
	analyze := "ANALYZE kv"
	if w.dialect == engine.MySQL {
		analyze = "ANALYZE TABLE kv"
	}
	return l.Exec(ctx, analyze)
}

// preloadSource yields rows i+1..last as a workload.RowSource.
type preloadSource struct {
	w        *Workload
	r        *rand.Rand
	base     uint64
	ctx      context.Context
	i, last  int64
	row      []any
	err      error
	progress func(int64)
	reported int64
}

// Next implements workload.RowSource.
func (s *preloadSource) Next() bool {
	if s.i >= s.last || s.err != nil {
		return false
	}
	if s.i%1000 == 0 {
		if s.err = s.ctx.Err(); s.err != nil {
			return false
		}
	}
	s.i++
	if s.progress != nil && s.i-s.reported >= progressEvery {
		s.progress(s.i)
		s.reported = s.i
	}
	k := make([]byte, s.w.keyBytes)
	fill(s.r, k[:s.w.keyBytes-8])
	binary.BigEndian.PutUint64(k[s.w.keyBytes-8:], mix(s.base+uint64(s.i)))
	s.row = []any{k, fill(s.r, make([]byte, s.w.valueBytes))}
	return true
}

// Values implements workload.RowSource.
func (s *preloadSource) Values() ([]any, error) { return s.row, nil }

// Err implements workload.RowSource.
func (s *preloadSource) Err() error { return s.err }

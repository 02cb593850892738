package driver

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// scheduler releases open-loop transactions at their intended times.
type scheduler struct {
	d       *run
	end     int64
	jobs    chan int64
	skipped atomic.Int64
	behind  *hdrhistogram.Histogram

	mu      sync.Mutex
	pending []int64 // intended starts of skipped transactions, not yet recorded
}

// drain records every skipped transaction still pending with the latency
// it would at least have had, had it been sent at now.
func (s *scheduler) drain(now int64) {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, at := range p {
		s.d.rec.skip(now-at, s.d.phaseAt(at) == Measure)
	}
}

func newScheduler(d *run, end int64) *scheduler {
	// A short queue absorbs jitter; beyond it the driver cannot keep up
	// and the transaction is skipped (and counted) rather than piling up.
	return &scheduler{d: d, end: end, jobs: make(chan int64, 4*d.cfg.Users), behind: d.rec.behindHist}
}

func (s *scheduler) run(ctx context.Context) {
	defer close(s.jobs)
	r := rand.New(rand.NewPCG(uint64(s.d.cfg.Seed), math.MaxUint32))
	gap := float64(time.Second) / s.d.cfg.RatePerSec
	next := float64(s.d.start)
	for {
		if s.d.cfg.Poisson {
			next += r.ExpFloat64() * gap
		} else {
			next += gap
		}
		at := int64(next)
		if at >= s.end {
			return
		}
		if wait := time.Duration(at - s.d.cfg.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		select {
		case s.jobs <- at:
		default:
			if s.d.phaseAt(at) == Measure {
				s.skipped.Add(1)
			}
			s.mu.Lock()
			s.pending = append(s.pending, at)
			s.mu.Unlock()
		}
	}
}

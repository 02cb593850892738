package linkem

import "slices"

// traceClock serializes packets at the delivery opportunities of a Mahimahi
// trace. Opportunity k (counting from 0 over all repetitions) happens at
//
//	epoch + (k/n)*period + offset[k%n]
//
// where n is the number of entries. Each carries TraceOpportunityBytes bytes.
// A packet waiting at an opportunity (offered at or before it) takes bytes
// from it; the packet departs at the opportunity that covers its last byte,
// and the bytes that remain of that opportunity go to the next packet if it
// is waiting by then. Bytes of opportunities that find no packet waiting are
// wasted, as in Mahimahi.
type traceClock struct {
	on       bool
	pending  bool    // the epoch is the next offer's now (trace given to NewDirection)
	trace    *Trace  // the caller's trace, to notice a change by identity
	offsets  []int64 // sorted, in ns from the start of a repetition
	period   int64   // ns, > 0
	epoch    int64
	next     int64 // first opportunity none of whose bytes were used
	last     int64 // last opportunity used (next-1), when lastLeft > 0
	lastLeft int64 // bytes remaining in opportunity last
}

// validTrace returns t if it has at least one opportunity, nil otherwise: a
// trace without opportunities is ignored (the link uses RateBps).
func validTrace(t *Trace) *Trace {
	if t == nil || len(t.Opportunity) == 0 {
		return nil
	}
	return t
}

// tracePeriodMs is the length of one repetition of a valid trace: PeriodMs,
// but never less than its last timestamp nor less than 1 ms (ParseTrace
// already guarantees both; a Trace built by hand may not).
func tracePeriodMs(t *Trace) int64 {
	last := int64(0)
	for _, ms := range t.Opportunity {
		last = max(last, ms)
	}
	return max(t.PeriodMs, last, 1)
}

// traceMeanRateBps is the mean rate of a valid trace over tracePeriodMs.
func traceMeanRateBps(t *Trace) int64 {
	return int64(len(t.Opportunity)) * TraceOpportunityBytes * 8 * 1000 / tracePeriodMs(t)
}

// set switches to trace t (nil: no trace). A trace that is already running
// (the same *Trace) keeps its epoch and position; a new one starts at epoch
// (or, when pending, at the next offer).
func (c *traceClock) set(t *Trace, epoch int64, pending bool) {
	t = validTrace(t)
	if t == nil {
		*c = traceClock{offsets: c.offsets[:0]}
		return
	}
	if c.on && t == c.trace {
		return
	}
	offs := c.offsets[:0]
	for _, ms := range t.Opportunity {
		offs = append(offs, max(ms, 0)*1_000_000)
	}
	if !slices.IsSorted(offs) {
		slices.Sort(offs)
	}
	period := tracePeriodMs(t) * 1_000_000
	*c = traceClock{
		on: true, pending: pending, trace: t, offsets: offs, period: period, epoch: epoch,
	}
}

// at returns the time of opportunity k.
func (c *traceClock) at(k int64) int64 {
	n := int64(len(c.offsets))
	return c.epoch + (k/n)*c.period + c.offsets[k%n]
}

// firstAtOrAfter returns the first opportunity at or after t.
func (c *traceClock) firstAtOrAfter(t int64) int64 {
	rel := max(t-c.epoch, 0)
	rep, off := rel/c.period, rel%c.period
	// Binary search for the first offset >= off.
	lo, hi := 0, len(c.offsets)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.offsets[m] < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(c.offsets) {
		rep, lo = rep+1, 0
	}
	return rep*int64(len(c.offsets)) + int64(lo)
}

// depart schedules size bytes that are ready to leave at t (offered, and the
// link done with earlier packets) and returns their departure time.
func (c *traceClock) depart(t int64, size int) int64 {
	need := max(int64(size), 1) // even an empty packet needs an opportunity
	if c.lastLeft > 0 && c.at(c.last) >= t {
		// The previous packet left at opportunity last, which has bytes left
		// and has not happened yet: this packet is waiting when it does.
		if need <= c.lastLeft {
			c.lastLeft -= need
			return c.at(c.last)
		}
		need -= c.lastLeft
	}
	k := max(c.next, c.firstAtOrAfter(t))
	m := (need + TraceOpportunityBytes - 1) / TraceOpportunityBytes
	c.last = k + m - 1
	c.lastLeft = m*TraceOpportunityBytes - need
	c.next = k + m
	return c.at(c.last)
}

package linkem

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// TraceOpportunityBytes is what one delivery opportunity of a Mahimahi trace
// carries.
const TraceOpportunityBytes = 1500

// ParseTrace reads a Mahimahi packet-delivery trace: one non-negative integer
// millisecond timestamp per line, non-decreasing; a repeated timestamp means
// several opportunities in the same millisecond. Blank lines and lines
// starting with '#' are ignored. Errors name the line.
func ParseTrace(name string, r io.Reader) (*Trace, error) {
	t := &Trace{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	var last int64
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a millisecond timestamp (want one non-negative integer per line, Mahimahi format)", name, line, s)
		}
		if ms < last {
			return nil, fmt.Errorf("%s:%d: timestamp %d is before the previous one (%d): timestamps must not decrease", name, line, ms, last)
		}
		last = ms
		t.Opportunity = append(t.Opportunity, ms)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", name, err)
	}
	if len(t.Opportunity) == 0 {
		return nil, fmt.Errorf("%s: trace has no delivery opportunities", name)
	}
	t.PeriodMs = last
	if t.PeriodMs == 0 {
		// Every opportunity at 0 ms: repeat every millisecond, as Mahimahi does.
		t.PeriodMs = 1
	}
	return t, nil
}

// MeanRateBps is the trace's average delivery rate in bits per second.
func (t *Trace) MeanRateBps() int64 {
	if t == nil || t.PeriodMs == 0 {
		return 0
	}
	return int64(len(t.Opportunity)) * TraceOpportunityBytes * 8 * 1000 / t.PeriodMs
}

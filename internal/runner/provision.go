package runner

import (
	"fmt"
	"math"
	"sort"
	"time"

	"replab/internal/engine"
	"replab/internal/spec"
	"replab/internal/units"
	"replab/internal/workload"
)

// Provisioning is not what a run measures: copying a cluster and its data
// to a replica behind a 9.6 kbit/s link takes hours. With provision =
// "auto" (the default) a lab whose initial copies would take longer than
// AutoProvisionAfter is built and loaded over unshaped links, and the
// configured conditions apply from the first measurement on.

// AutoProvisionAfter is how long an initial copy across the configured
// links may take before provision = "auto" builds the lab over unshaped
// links.
const AutoProvisionAfter = time.Minute

// CopyEstimate is how long a node's initial copy would take across the
// configured links from its upstream: a rough figure, from the engine's
// and the workload's own estimates of the bytes, and the path's slowest
// direction (its rate, or what TCP keeps up under its loss).
type CopyEstimate struct {
	Node, From string
	Bytes      int64
	Path       string  // the direction that limits it, "a->b"
	RateBps    float64 // its effective rate; +Inf when nothing limits it
	Duration   time.Duration
}

// CopyEstimates estimates every replica's initial copy; nodes that copy
// nothing are left out. wl may be nil (a lab without a workload).
func CopyEstimates(s *spec.Spec, eng engine.Engine, wl workload.Workload) []CopyEstimate {
	var data int64
	if sz, ok := wl.(workload.Sizer); ok {
		data = sz.DataBytes()
	}
	cs, _ := eng.(engine.CopySizer)
	var first string // the first source: the data is loaded there
	for _, n := range s.Nodes {
		if n.From == "" && first == "" {
			first = n.Name
		}
	}
	var out []CopyEstimate
	for _, n := range s.Nodes {
		from := n.From
		if from == "" {
			if n.Name == first {
				continue
			}
			from = first // another master: the data replicates to it
		}
		bytes := data
		if cs != nil {
			bytes += cs.InitialCopyBytes(s, n.Name)
		}
		up := s.Node(from)
		if bytes == 0 || up == nil {
			continue
		}
		e := CopyEstimate{Node: n.Name, From: from, Bytes: bytes, RateBps: math.Inf(1)}
		e.Path, e.RateBps = slowest(s, up.Site, n.Site)
		if !math.IsInf(e.RateBps, 1) {
			e.Duration = time.Duration(float64(bytes) * 8 / e.RateBps * float64(time.Second))
		}
		out = append(out, e)
	}
	return out
}

// slowest is the slowest direction on the path from site a to site b, and
// its effective rate: the configured rate, or with loss what TCP sustains
// (Mathis et al.: 1.22 · MSS / (RTT · √p)), whichever is lower.
func slowest(s *spec.Spec, a, b string) (string, float64) {
	type hop struct {
		from, to string
		l        spec.Link
		fwd      bool
	}
	prev := map[string]hop{}
	seen := map[string]bool{a: true}
	queue := []string{a}
	for len(queue) > 0 && !seen[b] {
		cur := queue[0]
		queue = queue[1:]
		for _, l := range s.Links {
			for _, h := range []hop{{l.A, l.B, l, true}, {l.B, l.A, l, false}} {
				if h.from == cur && !seen[h.to] {
					seen[h.to] = true
					prev[h.to] = h
					queue = append(queue, h.to)
				}
			}
		}
	}
	var path []hop
	for at := b; at != a; {
		h, ok := prev[at]
		if !ok {
			return "", math.Inf(1) // same site, or no path (the spec refuses that)
		}
		path = append(path, h)
		at = h.from
	}
	var rtt time.Duration
	for _, h := range path {
		rtt += h.l.Forward.Delay + h.l.Reverse.Delay
	}
	name, best := "", math.Inf(1)
	for _, h := range path {
		p := h.l.Forward
		if !h.fwd {
			p = h.l.Reverse
		}
		rate := math.Inf(1)
		if p.RateBps > 0 {
			rate = float64(p.RateBps)
		}
		if p.Down {
			rate = 0
		}
		if loss := p.Loss; loss > 0 && rtt > 0 {
			mss := float64(max(p.MTU, 1500) - 40)
			rate = math.Min(rate, 1.22*mss*8/(rtt.Seconds()*math.Sqrt(loss)))
		}
		if rate < best {
			name, best = h.from+"->"+h.to, rate
		}
	}
	return name, best
}

// provisionFast decides whether this lab is built over unshaped links.
func provisionFast(s *spec.Spec, est []CopyEstimate) bool {
	switch s.Run.Provision {
	case spec.ProvisionFast:
		return true
	case spec.ProvisionLink:
		return false
	}
	for _, e := range est {
		if e.RateBps == 0 || e.Duration > AutoProvisionAfter {
			return true
		}
	}
	return false
}

// describe is one estimate in words.
func (e CopyEstimate) describe() string {
	rate := "a link that is down"
	if e.RateBps > 0 {
		rate = fmt.Sprintf("%s at %s", e.Path, units.Bits(e.RateBps))
	}
	took := "never"
	if e.RateBps > 0 {
		took = "about " + roundDuration(e.Duration).String()
	}
	return fmt.Sprintf("node %s's initial copy from %s (about %.1f MB) across %s: %s", e.Node, e.From, float64(e.Bytes)/1e6, rate, took)
}

// ProvisionWarnings are the initial copies across the configured links
// that would take more than a few minutes, slowest first: for validate and
// lab up, which provision across the configured links.
func ProvisionWarnings(s *spec.Spec, engines *engine.Registry, workloads *workload.Registry) []string {
	eng, err := engines.For(s)
	if err != nil || eng == nil {
		return nil
	}
	wl, _ := workloads.For(s, engine.DialectOf(eng))
	est := CopyEstimates(s, eng, wl)
	sort.Slice(est, func(i, j int) bool { return est[i].RateBps < est[j].RateBps || est[i].Duration > est[j].Duration })
	var out []string
	for _, e := range est {
		if e.RateBps == 0 || e.Duration > 3*time.Minute {
			out = append(out, e.describe()+` (replab run builds such a lab over unshaped links and applies the configured ones when it measures: [run] provision = "auto")`)
		}
	}
	return out
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// slowestCopy is the estimate that takes longest.
func slowestCopy(est []CopyEstimate) (CopyEstimate, bool) {
	var worst CopyEstimate
	found := false
	for _, e := range est {
		if !found || e.RateBps == 0 || (worst.RateBps != 0 && e.Duration > worst.Duration) {
			worst, found = e, true
		}
	}
	return worst, found
}

package lab

import (
	"fmt"
	"strings"

	"replab/internal/linkem"
	"replab/internal/units"
)

// FormatRate prints bits per second with a decimal unit, as specs write it.
func FormatRate(bps int64) string {
	switch {
	case bps == 0:
		return "unlimited"
	case bps >= 1e9:
		return trimFloat(float64(bps)/1e9) + "gbit"
	case bps >= 1e6:
		return trimFloat(float64(bps)/1e6) + "mbit"
	case bps >= 1e3:
		return trimFloat(float64(bps)/1e3) + "kbit"
	}
	return fmt.Sprintf("%dbit", bps)
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// DescribeParams prints a direction's parameters in spec vocabulary.
func DescribeParams(p linkem.Params) string {
	var b []string
	add := func(f string, a ...any) { b = append(b, fmt.Sprintf(f, a...)) }
	add("delay=%s", p.Delay)
	if p.Jitter > 0 {
		d := p.JitterDist
		if d == "" {
			d = linkem.JitterUniform
		}
		add("jitter=%s/%s", p.Jitter, d)
		if p.Reorder {
			add("reorder")
		}
	}
	if p.Trace != nil {
		add("trace=%s (mean %s)", p.Trace.Name, FormatRate(p.Trace.MeanRateBps()))
	} else {
		add("rate=%s", FormatRate(p.RateBps))
	}
	if q := queueBytes(p); q > 0 {
		add("queue=%s", units.Bytes(float64(q)))
	}
	if p.Loss > 0 {
		add("loss=%s%%", trimFloat(p.Loss*100))
	}
	if g := p.GE; g != nil {
		add("loss=gemodel %s%% %s%% %s%% %s%%", trimFloat(g.P*100), trimFloat(g.R*100), trimFloat(g.LossBad*100), trimFloat(g.LossGood*100))
	}
	if p.MTU != 0 && p.MTU != linkem.DefaultMTU {
		add("mtu=%d", p.MTU)
	}
	if p.Down {
		add("DOWN")
	}
	return strings.Join(b, " ")
}

func queueBytes(p linkem.Params) int64 {
	if p.QueueBytes > 0 {
		return p.QueueBytes
	}
	return linkem.DefaultQueueBytes(p)
}

// ParseDirection reads "A->B" (one direction) or "A<->B" (both).
func ParseDirection(s string) (LinkRequest, error) {
	if a, b, ok := strings.Cut(s, "<->"); ok && a != "" && b != "" {
		return LinkRequest{From: a, To: b, Both: true}, nil
	}
	if a, b, ok := strings.Cut(s, "->"); ok && a != "" && b != "" && !strings.HasSuffix(a, "<") {
		return LinkRequest{From: a, To: b}, nil
	}
	return LinkRequest{}, fmt.Errorf("%q is not a link direction: write SITE_A->SITE_B for one direction or SITE_A<->SITE_B for both", s)
}

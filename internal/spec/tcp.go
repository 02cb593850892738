package spec

import (
	"fmt"
	"strings"
	"time"
)

// TCPPreset is a named set of a site's TCP settings: the stack an older
// study ran on ([site.NAME] tcp = "1999"). A site's own keys override it.
type TCPPreset struct {
	Name        string
	Description string
	TCP         TCP
}

func boolp(b bool) *bool { return &b }
func intp(n int) *int    { return &n }

// tcpPresets: docs/lab.md ("Era TCP") gives the sources of each value.
var tcpPresets = []TCPPreset{{
	Name: "1999",
	Description: "a late-1990s stack (RFC 2581 Reno, as the page study's Solaris hosts and Linux 2.2 ran it): " +
		"an initial window of 2 segments, no SACK, no timestamps, no window scaling, a minimum RTO of 1 s, " +
		"and none of the later loss recovery (tail loss probes, RACK, F-RTO)",
	TCP: TCP{
		Congestion:         "reno",
		InitCwnd:           2,
		SACK:               boolp(false),
		Timestamps:         boolp(false),
		WindowScaling:      boolp(false),
		SlowStartAfterIdle: boolp(true),
		RTOMin:             time.Second,
		EarlyRetrans:       intp(0),
		Recovery:           intp(0),
		FRTO:               intp(0),
	},
}}

// TCPPresets lists the site TCP presets.
func TCPPresets() []TCPPreset { return tcpPresets }

func tcpPresetNames() []string {
	var n []string
	for _, p := range tcpPresets {
		n = append(n, p.Name)
	}
	return n
}

// Era TCP limits.
const (
	MaxInitCwnd = 100
	MaxRTOMin   = time.Minute
)

// tcpEra reads a site's tcp preset and the keys of older TCP stacks:
// tcp_initcwnd and tcp_rto_min (attributes of the site's routes),
// tcp_sack, tcp_timestamps, tcp_frto, tcp_early_retrans and tcp_recovery
// (the namespace's sysctls). The preset fills what the site does not set.
func (c *decoder) tcpEra(p path, m map[string]any, s *Site) {
	t := &s.TCP
	if v, ok := c.get(p, m, "tcp_initcwnd", kInt, "a whole number of segments, like 2"); ok {
		if n := v.(int64); n < 1 || n > MaxInitCwnd {
			c.fail(p.child("tcp_initcwnd"), v, "want a whole number of segments from 1 to %d (the route's initcwnd; Linux's own is 10)", MaxInitCwnd)
		} else {
			t.InitCwnd = int(n)
		}
	}
	if v, ok := c.get(p, m, "tcp_rto_min", kString, `a duration like "1s" or "200ms"`); ok {
		d, msg := parseDurationMax(v.(string), MaxRTOMin)
		switch {
		case msg != "":
		case d < time.Millisecond || d%time.Millisecond != 0:
			msg = `want whole milliseconds, at least "1ms" (the route's rto_min; Linux's own is 200ms)`
		}
		if msg != "" {
			c.fail(p.child("tcp_rto_min"), v, "%s", msg)
		} else {
			t.RTOMin = d
		}
	}
	boolean := func(key string, dst **bool) {
		if v, ok := c.get(p, m, key, kBool, "true or false"); ok {
			b := v.(bool)
			*dst = &b
		}
	}
	boolean("tcp_sack", &t.SACK)
	boolean("tcp_timestamps", &t.Timestamps)
	integer := func(key string, dst **int, hi int64, meaning string) {
		if v, ok := c.get(p, m, key, kInt, fmt.Sprintf("a whole number from 0 to %d", hi)); ok {
			if n := v.(int64); n < 0 || n > hi {
				c.fail(p.child(key), v, "want a whole number from 0 to %d: %s", hi, meaning)
			} else {
				x := int(n)
				*dst = &x
			}
		}
	}
	integer("tcp_frto", &t.FRTO, 2, "net.ipv4.tcp_frto, 0 turns F-RTO (RFC 5682) off")
	integer("tcp_early_retrans", &t.EarlyRetrans, 4, "net.ipv4.tcp_early_retrans, 0 turns tail loss probes off, 3 is Linux's default")
	integer("tcp_recovery", &t.Recovery, 7, "net.ipv4.tcp_recovery, a bit mask; 0 turns RACK loss detection off, 1 is Linux's default")

	v, ok := c.get(p, m, "tcp", kString, `a preset name like "1999"`)
	if !ok {
		return
	}
	name := strings.TrimSpace(v.(string))
	var pre *TCPPreset
	for i := range tcpPresets {
		if tcpPresets[i].Name == name {
			pre = &tcpPresets[i]
		}
	}
	if pre == nil {
		c.fail(p.child("tcp"), v, "unknown TCP preset%s; presets: %s", didYouMean(name, tcpPresetNames()), strings.Join(tcpPresetNames(), ", "))
		return
	}
	t.Preset = pre.Name
	pt := pre.TCP
	if _, own := m["tcp_congestion"]; !own && pt.Congestion != "" {
		t.Congestion = pt.Congestion
	}
	if t.InitCwnd == 0 {
		t.InitCwnd = pt.InitCwnd
	}
	if t.RTOMin == 0 {
		t.RTOMin = pt.RTOMin
	}
	for _, f := range []struct{ dst, pre **bool }{
		{&t.SACK, &pt.SACK}, {&t.Timestamps, &pt.Timestamps}, {&t.WindowScaling, &pt.WindowScaling},
		{&t.SlowStartAfterIdle, &pt.SlowStartAfterIdle},
	} {
		if *f.dst == nil && *f.pre != nil {
			b := **f.pre
			*f.dst = &b
		}
	}
	for _, f := range []struct{ dst, pre **int }{{&t.FRTO, &pt.FRTO}, {&t.EarlyRetrans, &pt.EarlyRetrans}, {&t.Recovery, &pt.Recovery}} {
		if *f.dst == nil && *f.pre != nil {
			n := **f.pre
			*f.dst = &n
		}
	}
}

// Describe writes a site's TCP settings in the spec's words, those it
// sets besides the congestion control: "" when it leaves the kernel's.
func (t TCP) Describe() string {
	var b []string
	add := func(f string, a ...any) { b = append(b, fmt.Sprintf(f, a...)) }
	onoff := func(key string, v *bool) {
		if v != nil {
			add("%s=%t", key, *v)
		}
	}
	num := func(key string, v *int) {
		if v != nil {
			add("%s=%d", key, *v)
		}
	}
	if t.InitCwnd > 0 {
		add("initcwnd=%d", t.InitCwnd)
	}
	if t.RTOMin > 0 {
		add("rto_min=%s", t.RTOMin)
	}
	onoff("sack", t.SACK)
	onoff("timestamps", t.Timestamps)
	onoff("window_scaling", t.WindowScaling)
	onoff("slow_start_after_idle", t.SlowStartAfterIdle)
	num("early_retrans", t.EarlyRetrans)
	num("recovery", t.Recovery)
	num("frto", t.FRTO)
	if t.Rmem != [3]int64{} {
		add("rmem=%d %d %d", t.Rmem[0], t.Rmem[1], t.Rmem[2])
	}
	if t.Wmem != [3]int64{} {
		add("wmem=%d %d %d", t.Wmem[0], t.Wmem[1], t.Wmem[2])
	}
	s := strings.Join(b, " ")
	if t.Preset != "" {
		s = "preset " + t.Preset + ": " + s
	}
	return s
}

package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"replab/internal/linkem"
	"replab/internal/linkem/emu"
	"replab/internal/spec"
)

// Status is what `replab lab status --json` prints.
type Status struct {
	Name     string          `json:"name"`
	PID      int             `json:"pid"`
	Started  time.Time       `json:"started"`
	Spec     string          `json:"spec"`
	Sites    []SiteStatus    `json:"sites"`
	Links    []LinkStatus    `json:"links"`
	Ports    []emu.PortStats `json:"ports"`
	Nodes    []NodeStatus    `json:"nodes,omitempty"`
	Captures []CaptureStatus `json:"captures,omitempty"`
	// Faults are the faults applied and healed through the control socket
	// (replab fault, replab link set), oldest first; FaultLog is the file
	// they are written to as well.
	Faults   []FaultRecord `json:"faults,omitempty"`
	FaultLog string        `json:"fault_log,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
}

// NodeStatus is a database server running in the lab, as its engine
// reported it (see SetNodes).
type NodeStatus struct {
	Name    string `json:"name"`
	Site    string `json:"site"`
	Role    string `json:"role"`
	From    string `json:"from,omitempty"`
	DSN     string `json:"dsn"`
	Version string `json:"version,omitempty"`
}

// SetNodes records the servers an engine started, for Status.
func (l *Lab) SetNodes(nodes []NodeStatus) {
	l.nodesMu.Lock()
	defer l.nodesMu.Unlock()
	l.nodes = nodes
}

// SiteStatus describes one site.
type SiteStatus struct {
	Name          string `json:"name"`
	Address       string `json:"address"`
	Netns         string `json:"netns"`
	TCPCongestion string `json:"tcp_congestion"`
	// TCP is the rest of its TCP settings in the spec's words (spec.TCP's
	// Describe): "" when it leaves the kernel's.
	TCP         string  `json:"tcp,omitempty"`
	CPUCores    float64 `json:"cpu_cores,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// TunTxDroppedPackets counts packets the kernel dropped before the
	// emulator read them; non-zero means the emulator fell behind.
	TunTxDroppedPackets uint64 `json:"tun_tx_dropped_packets"`
}

// LinkStatus is a link with both directions.
type LinkStatus struct {
	Name       string         `json:"name"`
	Sites      [2]string      `json:"sites"`
	Directions []emu.DirStats `json:"directions"`
}

// Status reports the running lab.
func (l *Lab) Status() Status {
	st := Status{Name: l.Spec.Lab.Name, PID: l.rec.PID, Started: l.rec.Started, Spec: l.Spec.File}
	for _, s := range l.sites {
		cc := s.TCP.Congestion
		if cc == "" {
			cc = "cubic"
		}
		drops, err := s.TunTxDropped()
		if err != nil {
			st.Warnings = append(st.Warnings, fmt.Sprintf("site %s: read TUN counters: %v", s.Name, err))
		} else if drops > 0 {
			st.Warnings = append(st.Warnings, fmt.Sprintf("site %s: the kernel dropped %d packets on %s before the emulator read them (emulator overloaded)", s.Name, drops, TUNName))
		}
		st.Sites = append(st.Sites, SiteStatus{
			Name: s.Name, Address: s.Address.String(), Netns: s.Netns,
			TCPCongestion: cc, TCP: s.TCP.Describe(), CPUCores: s.CPUCores, MemoryBytes: s.MemoryBytes,
			TunTxDroppedPackets: drops,
		})
	}
	dirs := l.emu.Stats()
	for _, lk := range l.Spec.Links {
		ls := LinkStatus{Name: lk.Name(), Sites: [2]string{lk.A, lk.B}}
		for _, d := range dirs {
			if (d.From == lk.A && d.To == lk.B) || (d.From == lk.B && d.To == lk.A) {
				ls.Directions = append(ls.Directions, d)
			}
		}
		st.Links = append(st.Links, ls)
	}
	st.Ports = l.emu.Ports()
	l.nodesMu.Lock()
	st.Nodes = append([]NodeStatus(nil), l.nodes...)
	l.nodesMu.Unlock()
	st.Warnings = append(st.Warnings, Warnings(dirs)...)
	st.Captures = l.Captures()
	st.Faults = l.FaultLog()
	st.FaultLog = l.FaultLogFile()
	for _, c := range st.Captures {
		if c.DroppedRecords > 0 {
			st.Warnings = append(st.Warnings, fmt.Sprintf("capture %s: %d packets not recorded in %s: the capture writer fell behind (a smaller snap length or a faster disk helps)", c.Direction, c.DroppedRecords, c.File))
		}
	}
	return st
}

// Warnings flags directions whose emulation was not faithful.
func Warnings(dirs []emu.DirStats) []string {
	var w []string
	for _, d := range dirs {
		if d.OverflowPackets > 0 {
			w = append(w, fmt.Sprintf("%s->%s: the emulator dropped %d packets because it held too many in flight: the link is faster than this machine can emulate", d.From, d.To, d.OverflowPackets))
		}
		if d.Lateness.P99Us > emu.FaithfulP99Us {
			w = append(w, fmt.Sprintf("%s->%s: delivery lateness p99 %.0f µs exceeds %d µs: the emulator is overloaded and the link is slower and jitterier than configured",
				d.From, d.To, d.Lateness.P99Us, emu.FaithfulP99Us))
		}
	}
	return w
}

// SetLink applies key=value changes (spec vocabulary, e.g. "delay=80ms",
// "rate=2mbit", "loss=1%", "down", "up") to from->to, and to to->from as
// well when both is set.
func (l *Lab) SetLink(from, to string, both bool, kvs []string) error {
	_, _, err := l.setLink(from, to, both, kvs)
	return err
}

// setLink is SetLink; it returns the directions it changed and their
// parameters before.
func (l *Lab) setLink(from, to string, both bool, kvs []string) ([][2]string, []linkem.Params, error) {
	if len(kvs) == 0 {
		return nil, nil, fmt.Errorf("nothing to set: give key=value pairs such as delay=80ms rate=2mbit loss=1%%, or down / up")
	}
	pairs := [][2]string{{from, to}}
	if both {
		pairs = append(pairs, [2]string{to, from})
	}
	base := ""
	if l.Spec.File != "" {
		base = filepath.Dir(l.Spec.File)
	}
	updated := make([]linkem.Params, len(pairs))
	before := make([]linkem.Params, len(pairs))
	for i, pr := range pairs {
		p, err := l.links().Params(pr[0], pr[1])
		if err != nil {
			return nil, nil, fmt.Errorf("%w (links: %s)", err, strings.Join(l.linkNames(), ", "))
		}
		old := p
		before[i] = p
		for _, kv := range kvs {
			if err := spec.ApplyKV(&p, kv, base); err != nil {
				return nil, nil, err
			}
		}
		if p.MTU != old.MTU {
			return nil, nil, fmt.Errorf("mtu cannot change while the lab runs (routes carry it): set it in the spec")
		}
		updated[i] = p
	}
	// Validate everything first so a bad value changes nothing.
	for i, pr := range pairs {
		if err := l.links().SetParams(pr[0], pr[1], updated[i]); err != nil {
			return nil, nil, err
		}
	}
	return pairs, before, nil
}

func (l *Lab) linkNames() []string {
	var n []string
	for _, lk := range l.Spec.Links {
		n = append(n, lk.A+"->"+lk.B, lk.B+"->"+lk.A)
	}
	return n
}

// TunTxDropped returns how many packets the kernel dropped on the site's
// TUN device because the emulator did not read them fast enough (the
// device's tx_dropped): losses the link model did not decide.
func (s *Site) TunTxDropped() (uint64, error) {
	var n uint64
	err := s.Do(func() error {
		// /proc/thread-self/net follows the calling thread's namespace.
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, rest, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(name) != TUNName {
				continue
			}
			f := strings.Fields(rest)
			if len(f) < 12 {
				return fmt.Errorf("unexpected /proc/net/dev line %q", line)
			}
			// rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop …
			n, err = strconv.ParseUint(f[11], 10, 64)
			return err
		}
		return fmt.Errorf("no %s in /proc/net/dev", TUNName)
	})
	return n, err
}

// Unshape takes every link direction out of the way — no delay, jitter,
// rate limit or loss, up — keeping its MTU and seed: the lab can be built
// and loaded at LAN speed. Shape puts the spec's parameters back.
func (l *Lab) Unshape() error {
	t := l.links()
	if t == nil {
		return nil
	}
	for _, lk := range l.Spec.Links {
		for _, d := range []struct {
			from, to string
			p        linkem.Params
		}{{lk.A, lk.B, lk.Forward}, {lk.B, lk.A, lk.Reverse}} {
			if err := t.SetParams(d.from, d.to, linkem.Params{MTU: d.p.MTU, Seed: d.p.Seed}); err != nil {
				return fmt.Errorf("unshape %s->%s: %w", d.from, d.to, err)
			}
		}
	}
	return nil
}

// Shape applies the spec's link parameters (after Unshape, or runtime
// changes).
func (l *Lab) Shape() error {
	t := l.links()
	if t == nil {
		return nil
	}
	for _, lk := range l.Spec.Links {
		if err := t.SetParams(lk.A, lk.B, lk.Forward); err != nil {
			return fmt.Errorf("shape %s->%s: %w", lk.A, lk.B, err)
		}
		if err := t.SetParams(lk.B, lk.A, lk.Reverse); err != nil {
			return fmt.Errorf("shape %s->%s: %w", lk.B, lk.A, err)
		}
	}
	return nil
}

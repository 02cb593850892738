package spec

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"replab/internal/linkem"
	"replab/internal/linkem/pcap"
)

// DefaultSubnet is the lab subnet when [lab] sets none: the RFC 2544
// benchmarking range.
var DefaultSubnet = netip.MustParsePrefix("198.18.0.0/16")

// MaxSpecBytes bounds the size of a spec file.
const MaxSpecBytes = 1 << 20

// Defaults of a spec.
const (
	DefaultSeed       = 1
	DefaultCongestion = "cubic"
)

var (
	labNameRE  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	siteNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
	congRE     = regexp.MustCompile(`^[a-z0-9_]{1,15}$`)
)

var (
	topKeys  = []string{"lab", "site", "link", "engine", "node", "storage", "scheme", "workload", "run", "client", "fault", "sweep", "target"}
	labKeys  = []string{"name", "subnet", "seed", "hosts", "reserve"}
	siteKeys = []string{"address", "tcp_congestion", "tcp_rmem", "tcp_wmem", "rmem_max", "wmem_max",
		"tcp_window_scaling", "tcp_slow_start_after_idle", "tcp", "tcp_initcwnd", "tcp_rto_min", "tcp_sack", "tcp_timestamps",
		"tcp_frto", "tcp_early_retrans", "tcp_recovery", "cpu", "memory", "weight"}
	linkOnlyKeys = []string{"sites", "preset", "forward", "reverse", "capture", "capture_bytes"}
)

// Load reads and parses the spec at path. Relative trace paths in it start at
// the spec's directory.
func Load(path string) (*Spec, error) {
	s, err := LoadForCheck(path)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// LoadForCheck is Load for a caller that goes on checking the spec (its
// engine's and workload's parts, every sweep point: runner.Validate), so
// that every problem comes out in one pass: when the file could be read as
// TOML but some of its values are wrong, it returns those errors and also
// the spec as far as it could be read, which carries them (ReadErrors).
// Such a spec is for checking only, never for running.
func LoadForCheck(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	s, err := parse(path, data, &env{baseDir: filepath.Dir(path)})
	if s != nil {
		s.File = path
	}
	return s, err
}

// ReadErrors are the errors LoadForCheck found reading the spec; none for
// a spec that Load or Parse returned.
func (s *Spec) ReadErrors() ErrorList { return s.readErrs }

// Parse parses a spec held in memory; name is used in error messages, and
// relative trace paths start at name's directory. A returned error is an
// ErrorList: one line per problem, each naming file:line and the field.
func Parse(name string, data []byte) (*Spec, error) {
	s, err := parse(name, data, &env{baseDir: filepath.Dir(name)})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func parse(name string, data []byte, e *env) (s *Spec, err error) {
	defer func() {
		if r := recover(); r != nil {
			// A bug, not a user error; still never crash the caller.
			s, err = nil, ErrorList{{File: name, Line: 1, Msg: fmt.Sprintf("internal error reading spec (please report): %v", r)}}
		}
	}()
	if len(data) > MaxSpecBytes {
		return nil, ErrorList{{File: name, Line: 1, Msg: fmt.Sprintf("spec is %d bytes; at most 1MiB is accepted", len(data))}}
	}
	d, errs := decodeTOML(name, data)
	if errs != nil {
		return nil, sortErrors(errs)
	}
	c := &decoder{file: name, d: d, env: e}
	s = c.spec()
	s.name, s.raw, s.env = name, d, e
	if len(c.errs) > 0 {
		// What could be read, for LoadForCheck: Load and Parse drop it.
		s.readErrs = sortErrors(c.errs)
		return s, s.readErrs
	}
	return s, nil
}

// decoder turns a doc into a Spec, collecting every error.
type decoder struct {
	file string
	d    *doc
	env  *env
	errs ErrorList
}

// fail records an error about the value at p.
func (c *decoder) fail(p path, v any, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: c.d.line(p), Field: p.String(), Value: c.d.raw(p, v), Msg: fmt.Sprintf(format, args...)})
}

// failAt records an error about p (not its value).
func (c *decoder) failAt(p path, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: c.d.line(p), Field: p.String(), Msg: fmt.Sprintf(format, args...)})
}

// keysByPos returns m's keys in the order they were written.
func (c *decoder) keysByPos(p path, m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		oi, oj := c.d.order(p.child(keys[i])), c.d.order(p.child(keys[j]))
		if oi != oj {
			return oi < oj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// checkKeys reports every key of m not in accepted.
func (c *decoder) checkKeys(p path, m map[string]any, accepted []string, table string) {
	for _, k := range c.keysByPos(p, m) {
		if !contains(accepted, k) {
			c.failAt(p.child(k), "unknown key%s; accepted in %s: %s", didYouMean(k, accepted), table, strings.Join(accepted, ", "))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// table returns the value at p as a table, reporting anything else.
func (c *decoder) table(p path, v any, hint string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		c.fail(p, v, "want a table; %s", hint)
	}
	return m, ok
}

// get returns m[key] if present and of the right type; a wrong type is
// reported.
func (c *decoder) get(p path, m map[string]any, key string, kind valueKind, want string) (any, bool) {
	v, present := m[key]
	if !present {
		return nil, false
	}
	tv, ok := typeOK(kind, v)
	if !ok {
		c.fail(p.child(key), v, "%s", wantMsg(key, want, v))
		return nil, false
	}
	return tv, true
}

func (c *decoder) spec() *Spec {
	root := c.d.root
	c.checkKeys(nil, root, topKeys, "the top level")
	s := &Spec{}
	s.Lab = c.lab(root)
	s.Sites = c.sites(root, s.Lab.Subnet)
	if m, ok := root["lab"].(map[string]any); ok && len(s.Sites) > 0 {
		c.hosts(s, m)
	}
	s.Links = c.links(root, s)
	s.Storages = c.storages(root, s)
	c.cluster(root, s)
	c.nodeStorage(s)
	c.target(root, s)
	c.workloadAndRun(root, s)
	c.clients(root, s)
	s.Faults = c.faults(root, s)
	c.checkLinkSearch(s)
	c.sweep(root, s)
	return s
}

func (c *decoder) lab(root map[string]any) Lab {
	lab := Lab{Subnet: DefaultSubnet, Seed: DefaultSeed}
	p := path{"lab"}
	v, present := root["lab"]
	if _, target := root["target"]; !present && target {
		return lab // target mode: [target] names the results
	}
	if !present {
		c.errs = append(c.errs, &Error{File: c.file, Line: 1, Msg: `missing [lab] table; start the spec with [lab] and name = "my-lab" (or, to measure servers that exist, with [target]: see docs/target.md)`})
		return lab
	}
	m, ok := c.table(p, v, `write [lab] with name = "my-lab"`)
	if !ok {
		return lab
	}
	c.checkKeys(p, m, labKeys, "[lab]")
	if v, ok := c.get(p, m, "name", kString, `a string like "my-lab"`); ok {
		lab.Name = v.(string)
		if !labNameRE.MatchString(lab.Name) {
			c.fail(p.child("name"), v, "want 1 to 20 characters of a-z, 0-9 and '-', starting with a letter (it names namespaces and cgroups)")
		}
	} else if _, present := m["name"]; !present {
		c.failAt(p, `name is required, e.g. name = "my-lab"`)
	}
	if v, ok := c.get(p, m, "subnet", kString, `a string like "198.18.0.0/16"`); ok {
		lab.Subnet = netip.Prefix{}
		pf, err := netip.ParsePrefix(strings.TrimSpace(v.(string)))
		switch {
		case err != nil:
			c.fail(p.child("subnet"), v, `not an IPv4 subnet; want a prefix like "198.18.0.0/16"`)
		case !pf.Addr().Is4():
			c.fail(p.child("subnet"), v, `want an IPv4 subnet like "198.18.0.0/16"`)
		case pf.Masked() != pf:
			c.fail(p.child("subnet"), v, "host bits are set (did you mean %q?)", pf.Masked().String())
		case pf.Bits() > 30:
			c.fail(p.child("subnet"), v, "too small; want a prefix of /30 or shorter, like /16")
		default:
			lab.Subnet = pf
		}
	}
	if v, ok := c.get(p, m, "seed", kInt, "an integer"); ok {
		lab.Seed = v.(int64)
	}
	return lab
}

func (c *decoder) sites(root map[string]any, subnet netip.Prefix) []Site {
	p := path{"site"}
	v, present := root["site"]
	if _, target := root["target"]; !present && target {
		return nil // target mode: no lab
	}
	if !present {
		c.errs = append(c.errs, &Error{File: c.file, Line: 1, Msg: "no sites; define at least two, like [site.primary] and [site.replica]"})
		return nil
	}
	m, ok := c.table(p, v, "write one [site.NAME] table per site")
	if !ok {
		return nil
	}
	names := c.keysByPos(p, m)
	if len(names) < 2 {
		found := "none"
		if len(names) == 1 {
			found = "1 (" + showKey(names[0]) + ")"
		}
		c.failAt(p, "need at least 2 sites, found %s; add another [site.NAME]", found)
	}
	var sites []Site
	for _, name := range names {
		sp := p.child(name)
		site := Site{Name: name, Line: c.d.line(sp), TCP: TCP{Congestion: DefaultCongestion}}
		if !siteNameRE.MatchString(name) {
			c.failAt(sp, "site name must be 1 to 15 characters of a-z, 0-9 and '-', starting with a letter (it names a network namespace)")
		}
		if sm, ok := c.table(sp, m[name], fmt.Sprintf("write [site.%s]", showKey(name))); ok {
			c.site(sp, sm, &site)
		}
		sites = append(sites, site)
	}
	c.addresses(sites, subnet)
	return sites
}

func (c *decoder) site(p path, m map[string]any, s *Site) {
	c.checkKeys(p, m, siteKeys, "[site."+showKey(s.Name)+"]")
	if v, ok := c.get(p, m, "address", kString, `a string like "198.18.0.10"`); ok {
		a, err := netip.ParseAddr(strings.TrimSpace(v.(string)))
		if err != nil || !a.Is4() {
			c.fail(p.child("address"), v, `not an IPv4 address; want one like "198.18.0.10" inside the lab subnet`)
		} else {
			s.Address = a
		}
	}
	if v, ok := c.get(p, m, "tcp_congestion", kString, `a string like "cubic"`); ok {
		if !congRE.MatchString(v.(string)) {
			c.fail(p.child("tcp_congestion"), v, `want a congestion control name of a-z, 0-9 and '_', like "cubic", "reno" or "bbr"`)
		} else {
			s.TCP.Congestion = v.(string)
		}
	}
	mem := func(key string, dst *[3]int64) {
		if v, ok := c.get(p, m, key, kString, `a string like "4096 131072 33554432" or "32MiB"`); ok {
			r, msg := parseMem(v.(string))
			if msg != "" {
				c.fail(p.child(key), v, "%s", msg)
			} else {
				*dst = r
			}
		}
	}
	mem("tcp_rmem", &s.TCP.Rmem)
	mem("tcp_wmem", &s.TCP.Wmem)
	size := func(key string, minB, maxB int64, rng string) int64 {
		v, ok := c.get(p, m, key, kString, `a string with a unit, like "32MiB"`)
		if !ok {
			return 0
		}
		b, msg := parseSize(v.(string))
		if msg == "" && (b < minB || b > maxB) {
			msg = "must be " + rng
		}
		if msg != "" {
			c.fail(p.child(key), v, "%s", msg)
			return 0
		}
		return b
	}
	s.TCP.RmemMax = size("rmem_max", 4096, MaxSysctl, "between 4KiB and 2GiB-1")
	s.TCP.WmemMax = size("wmem_max", 4096, MaxSysctl, "between 4KiB and 2GiB-1")
	s.MemoryBytes = size("memory", MinMemory, 1<<40, "at least 16MiB (and at most 1TiB)")
	boolean := func(key string) *bool {
		if v, ok := c.get(p, m, key, kBool, "true or false"); ok {
			b := v.(bool)
			return &b
		}
		return nil
	}
	s.TCP.WindowScaling = boolean("tcp_window_scaling")
	s.TCP.SlowStartAfterIdle = boolean("tcp_slow_start_after_idle")
	if v, ok := c.get(p, m, "cpu", kNumber, "a number of cores, like 0.5 or 2"); ok {
		f := v.(float64)
		if !(f > 0 && f <= 1024) {
			c.fail(p.child("cpu"), m["cpu"], "want a number of cores above 0 and at most 1024, like 0.5 or 2")
		} else {
			s.CPUCores = f
		}
	}
	c.readWeight(p, m, s)
	c.tcpEra(p, m, s)
}

// addresses checks explicit site addresses and allocates the others from
// the subnet in declaration order: base+1, base+2, …, skipping taken ones.
func (c *decoder) addresses(sites []Site, subnet netip.Prefix) {
	if !subnet.IsValid() {
		return // already reported
	}
	base := subnet.Addr()
	bcast := lastAddr(subnet)
	taken := map[netip.Addr]int{} // address -> index in sites
	bad := false
	for i := range sites {
		s := &sites[i]
		if !s.Address.IsValid() {
			continue
		}
		ap := path{"site", s.Name, "address"}
		var raw any // the value as written is found by path
		switch {
		case !subnet.Contains(s.Address):
			c.fail(ap, raw, "outside the lab subnet %s", subnet)
		case s.Address == base:
			c.fail(ap, raw, "is the subnet's network address; use %s or later", base.Next())
		case s.Address == bcast:
			c.fail(ap, raw, "is the subnet's broadcast address")
		default:
			if j, dup := taken[s.Address]; dup {
				c.fail(ap, raw, "already used by site %s (line %d); addresses must be unique", sites[j].Name, sites[j].Line)
			} else {
				taken[s.Address] = i
			}
			continue
		}
		s.Address = netip.Addr{}
		bad = true
	}
	if bad {
		return // do not allocate around a broken explicit address
	}
	next := base.Next()
	for i := range sites {
		if sites[i].Address.IsValid() {
			continue
		}
		for {
			if _, used := taken[next]; !used {
				break
			}
			next = next.Next()
		}
		if !subnet.Contains(next) || next == bcast {
			c.failAt(path{"site", sites[i].Name}, "no free address left in the lab subnet %s; use a larger lab.subnet", subnet)
			return
		}
		sites[i].Address = next
		taken[next] = i
		next = next.Next()
	}
}

// lastAddr returns the broadcast address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (c *decoder) links(root map[string]any, s *Spec) []Link {
	v, present := root["link"]
	if !present {
		return nil
	}
	p := path{"link"}
	arr, ok := v.([]any)
	if !ok {
		c.fail(p, v, "want a list of links: write each one as [[link]] (double brackets)")
		return nil
	}
	defined := map[string]bool{}
	var names []string
	for _, st := range s.Sites {
		defined[st.Name] = true
		names = append(names, st.Name)
	}
	pairs := map[[2]string]int{} // sorted site pair -> link index
	var links []Link
	for i, lv := range arr {
		lp := p.child(idx(i))
		m, ok := c.table(lp, lv, "write each link as a [[link]] table")
		if !ok {
			continue
		}
		l, ok := c.link(lp, i, m, s.Lab.Seed, defined, names)
		if !ok {
			continue
		}
		key := [2]string{l.A, l.B}
		if key[0] > key[1] {
			key[0], key[1] = key[1], key[0]
		}
		if j, dup := pairs[key]; dup {
			c.fail(lp.child("sites"), m["sites"], "%s and %s are already linked by link[%d] (line %d); merge the two, using [link.forward] / [link.reverse] for differences",
				l.A, l.B, j+1, links[j].Line)
			continue
		}
		pairs[key] = len(links)
		links = append(links, l)
	}
	return links
}

// link decodes one [[link]]; ok is false when its sites are unusable.
func (c *decoder) link(p path, i int, m map[string]any, labSeed int64, defined map[string]bool, names []string) (Link, bool) {
	l := Link{Line: c.d.line(p)}
	accepted := append(append([]string(nil), linkOnlyKeys...), dirKeyNames()...)
	c.checkKeys(p, m, accepted, "[[link]]")

	sitesOK := false
	sp := p.child("sites")
	if sv, present := m["sites"]; !present {
		c.failAt(p, `sites is required, e.g. sites = ["primary", "replica"]`)
	} else if arr, ok := sv.([]any); !ok || len(arr) != 2 {
		c.fail(sp, sv, `want exactly two site names, like ["primary", "replica"]`)
	} else if a, ok1 := arr[0].(string); !ok1 {
		c.fail(sp, sv, `want exactly two site names, like ["primary", "replica"]`)
	} else if b, ok2 := arr[1].(string); !ok2 {
		c.fail(sp, sv, `want exactly two site names, like ["primary", "replica"]`)
	} else {
		l.A, l.B = a, b
		sitesOK = true
		for _, n := range []string{a, b} {
			if !defined[n] {
				c.fail(sp, sv, "unknown site %q%s; defined sites: %s", clean(n), didYouMean(n, names), strings.Join(names, ", "))
				sitesOK = false
			}
		}
		if a == b {
			c.fail(sp, sv, "a link joins two different sites")
			sitesOK = false
		}
	}

	var base linkem.Params
	if v, ok := c.get(p, m, "preset", kString, `a preset name like "transatlantic"`); ok {
		name := v.(string)
		if pr, ok := findPreset(name); ok {
			l.Preset = name
			base = pr.Params
		} else {
			c.fail(p.child("preset"), v, "unknown preset%s; presets: %s", didYouMean(name, presetNames()), strings.Join(presetNames(), ", "))
		}
	}

	c.capture(p, m, &l)

	fwd, rev := &dirState{p: base}, &dirState{p: base}
	// Keys at the top of [[link]] apply to both directions.
	c.applyDir(p, m, fwd)
	c.applyDir(p, m, rev)
	if rev.seedSet {
		rev.p.Seed++ // one link-level seed: the reverse direction gets seed+1
	}
	for _, d := range []struct {
		name string
		st   *dirState
	}{{"forward", fwd}, {"reverse", rev}} {
		dv, present := m[d.name]
		if !present {
			continue
		}
		dp := p.child(d.name)
		dm, ok := c.table(dp, dv, fmt.Sprintf("write [link.%s] after the [[link]] it belongs to", d.name))
		if !ok {
			continue
		}
		c.checkKeys(dp, dm, dirKeyNames(), "[link."+d.name+"]")
		c.applyDir(dp, dm, d.st)
	}
	if !fwd.seedSet {
		fwd.p.Seed = labSeed + 2*int64(i)
	}
	if !rev.seedSet {
		rev.p.Seed = labSeed + 2*int64(i) + 1
	}
	// A queue problem is reported once when both directions share it.
	fmsg, rmsg := fwd.finish(), rev.finish()
	if fmsg != "" && rmsg != "" && fmsg == rmsg && fwd.queue.at.key() == rev.queue.at.key() {
		c.queueErr(fwd.queue, fmsg)
	} else {
		if fmsg != "" {
			c.queueErr(fwd.queue, fmsg+" (forward direction)")
		}
		if rmsg != "" {
			c.queueErr(rev.queue, rmsg+" (reverse direction)")
		}
	}
	l.Forward, l.Reverse = fwd.p, rev.p
	return l, sitesOK
}

// capture reads capture and capture_bytes of a [[link]].
func (c *decoder) capture(p path, m map[string]any, l *Link) {
	if v, ok := c.get(p, m, "capture", kBool, "true or false"); ok {
		l.Capture = v.(bool)
	}
	v, ok := c.get(p, m, "capture_bytes", kInt, fmt.Sprintf("an integer between %d and %d", pcap.MinSnapLen, pcap.MaxSnapLen))
	if !ok {
		return
	}
	n := v.(int64)
	switch {
	case n < pcap.MinSnapLen || n > pcap.MaxSnapLen:
		c.fail(p.child("capture_bytes"), v, "must be between %d and %d bytes (the most of each packet a capture keeps)", pcap.MinSnapLen, pcap.MaxSnapLen)
	case !l.Capture:
		c.fail(p.child("capture_bytes"), v, "has no effect without capture = true")
	default:
		l.CaptureBytes = int(n)
	}
}

func (c *decoder) queueErr(q *queueReq, msg string) {
	c.errs = append(c.errs, &Error{File: c.file, Line: c.d.line(q.at), Field: q.at.String(), Value: q.raw, Msg: msg})
}

// applyDir applies the direction keys present in m (a [[link]] or a
// [link.forward] / [link.reverse] table) to st. Unknown keys are reported
// by the caller.
func (c *decoder) applyDir(p path, m map[string]any, st *dirState) {
	for _, k := range c.keysByPos(p, m) {
		dk := findDirKey(k)
		if dk == nil {
			continue
		}
		v, ok := c.get(p, m, k, dk.kind, dk.want)
		if !ok {
			continue
		}
		kp := p.child(k)
		if msg := dk.set(st, v, c.env); msg != "" {
			c.fail(kp, v, "%s", msg)
			continue
		}
		if k == "queue" {
			st.queue.at, st.queue.raw = kp, c.d.raw(kp, v)
		}
	}
	if st.p.GE != nil { // directions must not share a model
		ge := *st.p.GE
		st.p.GE = &ge
	}
}

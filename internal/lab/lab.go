// Package lab builds a lab from a spec: one network namespace per site with
// a TUN device into the link emulator, addresses and routes to every other
// site, per-site TCP sysctls and cgroup limits. Everything it creates
// carries the lab's name and is removed by Close, and by Down after a crash.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"replab/internal/linkem"
	"replab/internal/linkem/emu"
	"replab/internal/spec"
)

// TUNName is the name of every site's interface into the emulator (each
// site has its own namespace, so the name never clashes).
const TUNName = "wan0"

// tunTxQueueLen: the default 500 drops packets under load (seen as TCP
// retransmits that the link model did not cause).
const tunTxQueueLen = 10000

// Options tune Up.
type Options struct {
	StateRoot string    // default DefaultStateRoot
	DataRoot  string    // default DefaultDataRoot
	Log       io.Writer // progress lines; nil = discard
	// SeriesCSV, if set, receives per-second link counters (see series.go).
	SeriesCSV string
	// CaptureDir receives pcap files of link directions ([[link]] capture
	// = true, and replab capture without -o); "" = DataRoot/LAB.captures,
	// which outlives the lab.
	CaptureDir string
	// NoControl skips the control socket (tests that drive the Lab directly).
	NoControl bool
	// Offline builds sites without namespaces, links, cgroups or
	// emulator: a lab for engines that run in-process (the fake engine of
	// tests), which needs no root. Only the data directory and the state
	// record exist.
	Offline bool

	cgroups cgroupDriver // nil: the one chosen for this machine (tests pick one)
}

// Lab is a running lab. Close removes it.
type Lab struct {
	Spec     *spec.Spec
	sites    []*Site
	emu      *emu.Emulator
	offline  *offlineLinks // an offline lab's links (no emulator)
	rec      *record
	root     string
	dataRoot string
	log      io.Writer
	cg       cgroupDriver
	dataMu   sync.Mutex
	nodesMu  sync.Mutex
	nodes    []NodeStatus
	vols     map[string]*volume // by node: storage volumes (storage.go), guarded by nodesMu
	storeEPs []netip.AddrPort   // storage services' addresses and ports (classes.go), guarded by nodesMu
	faults   faultLog

	capDir  string
	caps    captures
	closing chan struct{} // closed when Close begins: ends control-socket captures

	stopSeries func()
	stopCtl    func()
	closeOnce  sync.Once
	closeErr   error
}

// Site is one running site.
type Site struct {
	spec.Site
	Netns   string   // network namespace name
	Cgroups []string // cgroup directories its processes join
}

// Do runs f on a thread inside the site's network namespace.
func (s *Site) Do(f func() error) error { return inNetns(s.Netns, f) }

// Preflight checks what a lab needs from the machine and says what is
// missing in one line.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("replab needs root to create network namespaces and TUN devices: run it with sudo or as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the ip command is missing: install iproute2 (apt-get install iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return errors.New("/dev/net/tun is missing: load the tun module (modprobe tun) or, in a container, pass the device in")
	}
	return nil
}

// Up builds the lab described by s. On error everything it created is
// removed again.
func Up(ctx context.Context, s *spec.Spec, opt Options) (l *Lab, err error) {
	if !opt.Offline {
		if err := Preflight(); err != nil {
			return nil, err
		}
	}
	if opt.StateRoot == "" {
		opt.StateRoot = DefaultStateRoot
	}
	if opt.DataRoot == "" {
		opt.DataRoot = DefaultDataRoot
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	l = &Lab{Spec: s, root: opt.StateRoot, dataRoot: opt.DataRoot, log: opt.Log, cg: opt.cgroups,
		capDir: opt.CaptureDir, closing: make(chan struct{})}
	if !opt.Offline {
		if err := l.checkLimits(); err != nil {
			return nil, err
		}
	}
	if err := l.claim(ctx); err != nil {
		return nil, err
	}
	// Every error return below sets the named result to nil before this
	// runs: close the lab through its own variable.
	started := l
	defer func() {
		if err != nil {
			if cerr := started.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", cerr))
			}
		}
	}()
	if opt.Offline {
		for _, ss := range s.Sites {
			l.sites = append(l.sites, &Site{Site: ss})
		}
		l.offline = newOfflineLinks(s)
		if err := l.upStorage(ctx, true); err != nil {
			return nil, err
		}
		return l, nil
	}
	if err := l.rootSysctls(); err != nil {
		return nil, err
	}
	ports := make([]emu.Port, 0, len(s.Sites))
	for _, ss := range s.Sites {
		dev, site, err := l.createSite(ctx, ss)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", ss.Name, err)
		}
		l.sites = append(l.sites, site)
		ports = append(ports, emu.Port{Name: ss.Name, Addr: ss.Address, Dev: dev, MTU: l.siteMTU(ss.Name)})
	}
	if err := l.startEmulator(ports); err != nil {
		return nil, err
	}
	if err := l.startSpecCaptures(); err != nil {
		return nil, err
	}
	if err := l.routeSites(ctx); err != nil {
		return nil, err
	}
	if !opt.NoControl {
		if err := l.openFaultLog(); err != nil {
			return nil, err
		}
		stop, err := l.serveControl()
		if err != nil {
			return nil, err
		}
		l.stopCtl = stop
	}
	if opt.SeriesCSV != "" {
		stop, err := l.startSeries(opt.SeriesCSV)
		if err != nil {
			return nil, err
		}
		l.stopSeries = stop
	}
	if err := l.verify(ctx); err != nil {
		return nil, err
	}
	// After the links, which carry the storage's traffic; before any
	// engine, whose files live on it.
	if err := l.upStorage(ctx, false); err != nil {
		return nil, err
	}
	return l, nil
}

// checkLimits picks the cgroup hierarchy and refuses, before anything is
// created, a site limit it cannot apply: a limit is never ignored.
func (l *Lab) checkLimits() error {
	if l.cg == nil {
		d, err := systemCgroupDriver()
		if err != nil {
			return err
		}
		l.cg = d
	}
	var errs []error
	for _, ss := range l.Spec.Sites {
		err := l.cg.check(l.limitsOf(ss))
		list := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			list = j.Unwrap() // one line per refused limit, each naming the site
		}
		for _, e := range list {
			if e != nil {
				errs = append(errs, fmt.Errorf("site %s: %w", ss.Name, e))
			}
		}
	}
	return errors.Join(errs...)
}

func (l *Lab) limitsOf(ss spec.Site) siteLimits {
	lim := siteLimits{cpuCores: ss.CPUCores, memBytes: ss.MemoryBytes}
	for _, n := range l.Spec.Nodes {
		if st := l.Spec.StorageOf(n.Name); n.Site == ss.Name && st != nil && (st.IOPS > 0 || st.BandwidthBps > 0) {
			lim.io = fmt.Sprintf("storage %s of node %s: iops and bandwidth", st.Name, n.Name)
		}
	}
	return lim
}

// claim takes the lab's name: it refuses when a lab of that name is
// running and cleans up what a crashed one left behind.
func (l *Lab) claim(ctx context.Context) error {
	name := l.Spec.Lab.Name
	if r, err := loadRecord(l.root, name); err == nil {
		if r.alive() {
			return fmt.Errorf("lab %s is already running (pid %d): stop it with Ctrl-C there or `replab lab down %s`", name, r.PID, name)
		}
		fmt.Fprintf(l.log, "removing what an earlier run of lab %s left behind (pid %d is gone)\n", name, r.PID)
	}
	if _, err := Down(ctx, l.root, name); err != nil {
		return fmt.Errorf("remove leftovers of lab %s: %w", name, err)
	}
	l.rec = &record{
		Name:     name,
		PID:      os.Getpid(),
		PIDStart: procStart(os.Getpid()),
		Started:  time.Now().UTC(),
		Spec:     l.Spec.File,
		Control:  filepath.Join(labDir(l.root, name), "control.sock"),
	}
	if err := l.rec.save(l.root); err != nil {
		return err
	}
	return makeTraversable(labDir(l.root, name))
}

// rootSysctls makes each site's congestion control allowed in the root
// namespace (namespaces may only pick allowed ones) and raises the global
// socket buffer limits the sites ask for; both are restored on Close.
func (l *Lab) rootSysctls() error {
	const allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	const available = "/proc/sys/net/ipv4/tcp_available_congestion_control"
	cur, err := readProc(allowed)
	if err != nil {
		return fmt.Errorf("read allowed congestion controls: %w", err)
	}
	list := strings.Fields(cur)
	var rmem, wmem int64
	for _, st := range l.Spec.Sites {
		cc := st.TCP.Congestion
		rmem, wmem = max(rmem, st.TCP.RmemMax), max(wmem, st.TCP.WmemMax)
		if cc == "" || slices.Contains(list, cc) {
			continue
		}
		avail, _ := readProc(available)
		if !slices.Contains(strings.Fields(avail), cc) {
			// The kernel loads tcp_<name> modules on demand in the root namespace.
			_ = exec.Command("modprobe", "tcp_"+cc).Run()
			avail, _ = readProc(available)
			if !slices.Contains(strings.Fields(avail), cc) {
				return fmt.Errorf("site %s: tcp_congestion = %q is not available in this kernel (available: %s)", st.Name, cc, avail)
			}
		}
		list = append(list, cc)
	}
	name := l.Spec.Lab.Name
	if len(list) > len(strings.Fields(cur)) {
		needed := list
		err := holdRootSysctl(name, allowed, func(now string) string {
			have := strings.Fields(now)
			for _, cc := range needed {
				if !slices.Contains(have, cc) {
					have = append(have, cc)
				}
			}
			return strings.Join(have, " ")
		})
		if err != nil {
			return err
		}
	}
	for _, s := range []struct {
		path string
		want int64
	}{{"/proc/sys/net/core/rmem_max", rmem}, {"/proc/sys/net/core/wmem_max", wmem}} {
		if s.want == 0 {
			continue
		}
		want := s.want
		err := holdRootSysctl(name, s.path, func(now string) string {
			if n, err := strconv.ParseInt(now, 10, 64); err == nil && n >= want {
				return now
			}
			return strconv.FormatInt(want, 10)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// siteMTU is the largest MTU of the site's links: the TUN device's MTU.
// Routes carry each path's own MTU.
func (l *Lab) siteMTU(site string) int {
	m := linkem.DefaultMTU
	for _, lk := range l.Spec.Links {
		if lk.A == site || lk.B == site {
			m = max(m, mtuOf(lk.Forward), mtuOf(lk.Reverse))
		}
	}
	return m
}

func mtuOf(p linkem.Params) int {
	if p.MTU == 0 {
		return linkem.DefaultMTU
	}
	return p.MTU
}

func (l *Lab) createSite(ctx context.Context, ss spec.Site) (emu.Device, *Site, error) {
	site := &Site{Site: ss, Netns: objectName(l.Spec.Lab.Name, ss.Name)}
	l.rec.Netns = append(l.rec.Netns, site.Netns)
	if err := l.rec.save(l.root); err != nil {
		return nil, nil, err
	}
	if err := runIP(ctx, "netns", "add", site.Netns); err != nil {
		return nil, nil, err
	}
	cgs, err := l.cg.create(site.Netns, l.limitsOf(ss))
	l.rec.Cgroups = append(l.rec.Cgroups, cgs...)
	site.Cgroups = cgs
	if serr := l.rec.save(l.root); err == nil {
		err = serr
	}
	if err != nil {
		return nil, nil, err
	}
	var dev emu.Device
	err = site.Do(func() error {
		if err := siteSysctls(ss); err != nil {
			return err
		}
		d, err := emu.OpenTUN(TUNName)
		dev = d
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	ns := site.Netns
	mtu := strconv.Itoa(l.siteMTU(ss.Name))
	steps := [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "set", TUNName, "mtu", mtu, "txqueuelen", strconv.Itoa(tunTxQueueLen), "up"},
		{"-n", ns, "addr", "add", ss.Address.String() + "/32", "dev", TUNName},
	}
	for _, args := range steps {
		if err := runIP(ctx, args...); err != nil {
			dev.Close()
			return nil, nil, err
		}
	}
	return dev, site, nil
}

// siteSysctls applies a site's TCP settings inside its namespace (the
// caller's thread is in it).
func siteSysctls(ss spec.Site) error {
	set := func(name, val string) error {
		return writeProc("/proc/sys/"+strings.ReplaceAll(name, ".", "/"), val)
	}
	// Sites are IPv4 only; without IPv6 the kernel sends no stray
	// router solicitations through the link.
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		_ = set(k, "1")
	}
	// A server's answers carry the TOS its client's SYN had: the mark
	// DialContext puts on the lab's own connections (linkem.ClientTOS),
	// so both directions of a client's connection are counted as client
	// traffic (classes.go). Best effort: without it only the client's
	// direction carries the mark.
	_ = set("net.ipv4.tcp_reflect_tos", "1")
	t := ss.TCP
	cc := t.Congestion
	if cc == "" {
		cc = "cubic"
	}
	if err := set("net.ipv4.tcp_congestion_control", cc); err != nil {
		return err
	}
	triple := func(v [3]int64) string { return fmt.Sprintf("%d %d %d", v[0], v[1], v[2]) }
	if t.Rmem != [3]int64{} {
		if err := set("net.ipv4.tcp_rmem", triple(t.Rmem)); err != nil {
			return err
		}
	}
	if t.Wmem != [3]int64{} {
		if err := set("net.ipv4.tcp_wmem", triple(t.Wmem)); err != nil {
			return err
		}
	}
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	if t.WindowScaling != nil {
		if err := set("net.ipv4.tcp_window_scaling", b(*t.WindowScaling)); err != nil {
			return err
		}
	}
	if t.SlowStartAfterIdle != nil {
		if err := set("net.ipv4.tcp_slow_start_after_idle", b(*t.SlowStartAfterIdle)); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    *bool
	}{{"net.ipv4.tcp_sack", t.SACK}, {"net.ipv4.tcp_timestamps", t.Timestamps}} {
		if f.v != nil {
			if err := set(f.name, b(*f.v)); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"net.ipv4.tcp_frto", t.FRTO}, {"net.ipv4.tcp_early_retrans", t.EarlyRetrans}, {"net.ipv4.tcp_recovery", t.Recovery}} {
		if f.v != nil {
			if err := set(f.name, strconv.Itoa(*f.v)); err != nil {
				return err
			}
		}
	}
	return nil
}

// routeTCP is what a site's routes carry of its TCP: the initial
// congestion window and the least retransmission timeout of the
// connections it opens or accepts (ip-route(8) initcwnd, rto_min).
func routeTCP(t spec.TCP) []string {
	var args []string
	if t.InitCwnd > 0 {
		args = append(args, "initcwnd", strconv.Itoa(t.InitCwnd))
	}
	if t.RTOMin > 0 {
		args = append(args, "rto_min", strconv.FormatInt(t.RTOMin.Milliseconds(), 10)+"ms")
	}
	return args
}

func (l *Lab) startEmulator(ports []emu.Port) error {
	idx := map[string]int{}
	for i, p := range ports {
		idx[p.Name] = i
	}
	var links []emu.Link
	for _, lk := range l.Spec.Links {
		links = append(links, emu.Link{A: idx[lk.A], B: idx[lk.B], Forward: lk.Forward, Reverse: lk.Reverse})
	}
	e, err := emu.New(emu.Config{Ports: ports, Links: links})
	if err != nil {
		for _, p := range ports {
			p.Dev.Close()
		}
		return fmt.Errorf("start link emulator: %w", err)
	}
	e.Start()
	l.emu = e
	return nil
}

// routeSites adds, in every site, a route to each site it can reach, with
// the path's MTU (the smallest MTU of the links crossed) and the site's
// initcwnd and rto_min, when it sets them.
func (l *Lab) routeSites(ctx context.Context) error {
	for _, from := range l.sites {
		for _, to := range l.sites {
			if from == to {
				continue
			}
			mtu, ok := l.pathMTU(from.Name, to.Name)
			if !ok {
				continue
			}
			args := append([]string{"-n", from.Netns, "route", "add", to.Address.String() + "/32", "dev", TUNName,
				"src", from.Address.String(), "mtu", strconv.Itoa(mtu)}, routeTCP(from.TCP)...)
			if err := runIP(ctx, args...); err != nil {
				return fmt.Errorf("site %s: route to %s: %w", from.Name, to.Name, err)
			}
		}
	}
	return nil
}

func (l *Lab) pathMTU(from, to string) (int, bool) {
	path := l.emu.Path(from, to)
	if path == nil {
		return 0, false
	}
	m := 1 << 30
	for i := 0; i+1 < len(path); i++ {
		p, err := l.emu.Params(path[i], path[i+1])
		if err != nil {
			return 0, false
		}
		m = min(m, mtuOf(p))
	}
	return m, true
}

// DataDir returns the lab's data directory, creating it on first use. It
// is removed with the lab (also by `lab down` after a crash).
func (l *Lab) DataDir() (string, error) {
	l.dataMu.Lock()
	defer l.dataMu.Unlock()
	if l.rec.DataDir != "" {
		return l.rec.DataDir, nil
	}
	dir := filepath.Join(l.dataRoot, l.Spec.Lab.Name)
	l.rec.DataDir = dir
	if err := l.rec.save(l.root); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create lab data directory: %w", err)
	}
	if err := makeTraversable(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// makeTraversable gives dir and its parents search permission for others:
// servers run as an unprivileged user and must reach their data and
// sockets. Nothing becomes readable.
func makeTraversable(dir string) error {
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("make %s traversable for the servers' OS user: %w", d, err)
			}
		}
	}
	return nil
}

// SocketDir returns a short directory for the servers' unix sockets,
// creating it on first use; it is removed with the lab.
func (l *Lab) SocketDir() (string, error) {
	l.dataMu.Lock()
	defer l.dataMu.Unlock()
	if l.rec.SockDir != "" {
		return l.rec.SockDir, nil
	}
	dir := filepath.Join(SocketRoot, l.Spec.Lab.Name)
	l.rec.SockDir = dir
	if err := l.rec.save(l.root); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create socket directory: %w", err)
	}
	if err := makeTraversable(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// Sites returns the running sites in spec order.
func (l *Lab) Sites() []*Site { return l.sites }

// Site returns the named site or nil.
func (l *Lab) Site(name string) *Site {
	for _, s := range l.sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Emulator gives access to link counters and runtime changes; nil for an
// offline lab.
func (l *Lab) Emulator() *emu.Emulator { return l.emu }

// Close stops the emulator and removes every namespace, cgroup, process
// and sysctl change of the lab. It is safe to call more than once.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		if l.closing != nil {
			close(l.closing)
		}
		if l.stopCtl != nil {
			l.stopCtl()
		}
		l.SetNodeControl(nil)
		// While the links still carry the storage's traffic.
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := l.downStorage(sctx); err != nil {
			errs = append(errs, err)
		}
		scancel()
		l.closeFaultLog()
		if l.stopSeries != nil {
			l.stopSeries()
		}
		if l.emu != nil {
			if err := l.emu.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		// After the emulator: every packet it delivered is in the files.
		if err := l.stopCaptures(); err != nil {
			errs = append(errs, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if l.rec != nil {
			if _, err := teardownRecord(ctx, l.root, l.rec); err != nil {
				errs = append(errs, err)
			}
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// Addr returns the address of a site, for callers that only know names.
func (l *Lab) Addr(site string) (netip.Addr, error) {
	if s := l.Site(site); s != nil {
		return s.Address, nil
	}
	return netip.Addr{}, fmt.Errorf("no site %q (sites: %s)", site, strings.Join(l.siteNames(), ", "))
}

func (l *Lab) siteNames() []string {
	var n []string
	for _, s := range l.sites {
		n = append(n, s.Name)
	}
	return n
}

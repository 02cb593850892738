// Package spec reads experiment specs (TOML) into typed, validated structs.
// Every error names the file, the line, the field and what is accepted.
package spec

import (
	"net/netip"
	"time"

	"replab/internal/faultkind"
	"replab/internal/linkem"
)

// Spec is a parsed, validated, defaulted experiment spec.
type Spec struct {
	File  string // path the spec was read from ("" when parsed from memory)
	Lab   Lab
	Sites []Site // in declaration order
	Links []Link // in declaration order

	Engine *Engine // nil when the spec has no [engine]: a bare network lab
	Nodes  []Node  // in declaration order
	Scheme Scheme
	// Storages are the [storage.NAME] tables, in declaration order: where
	// nodes' files live (Node.Storage names one).
	Storages []Storage

	// Target, when set, names existing servers to measure instead of a
	// lab (target mode): Sites, Links, Engine and Nodes are then empty.
	Target *Target

	Workload *Workload // nil when the spec has no [workload]
	Run      Run
	// Clients are the [[client]] groups, in the order written; none: every
	// user runs in Run.Client.
	Clients []Client
	Faults  []Fault      // [[fault]] tables, in the order written
	Sweep   []SweepParam // [sweep]: see Points

	// lines maps field paths ("node.e1.from", "scheme.commit") to the
	// line they were written on, so later checks (an engine's) can point
	// at them too.
	lines map[string]int
	name  string // file name for error messages (File, or Parse's name)
	raw   *doc   // the decoded TOML, for sweeps
	env   *env
	// readErrs are the errors found reading the spec, when it was read
	// for checking (LoadForCheck) and is incomplete.
	readErrs ErrorList
	// warnings are what its checks found that runs but does not do what
	// it seems to (Warnf).
	warnings ErrorList
}

// Engine is the [engine] table.
type Engine struct {
	Kind string // "postgres", …: see the engine registry
}

// Node is one [node.NAME] table: a database server in a site.
type Node struct {
	Name string
	Site string
	Role string // "primary", "standby", "replica", "master", "server", "electable", "secondary"; the engine decides which it supports
	From string // the node it replicates from ("" for primaries and masters)
	// ApplyDelay holds back replay on a standby (PostgreSQL's
	// recovery_min_apply_delay).
	ApplyDelay time.Duration
	Port       int               // 0 = the engine's default
	Storage    string            // a [storage.NAME] its files live on; "" = the lab's data directory
	Settings   map[string]string // [node.NAME.settings]: server settings, passed through as written
	Tables     []TableFilter     // [[node.NAME.table]]: a partial replica's tables
	Line       int
}

// TableFilter makes a replica partial: only rows matching Where and only
// Columns of Table (all when empty).
type TableFilter struct {
	Table   string
	Where   string
	Columns []string
	Line    int
}

// Scheme is the [scheme] table: how nodes replicate and how durable a
// commit is. Replication is common to every engine; every other key
// belongs to the engine, which reads and checks it through
// Spec.SchemeOptions (synchronous standbys, commit level, durability, …).
type Scheme struct {
	Replication string         // e.g. "async", "sync", "logical", "snapshot", "multimaster"; "" = the engine's default
	Options     map[string]any // every other key, TOML values as parsed
}

// Lab holds the [lab] table.
type Lab struct {
	Name   string       // [a-z0-9-], 1..20 chars: used in namespace and cgroup names
	Subnet netip.Prefix // site addresses are allocated from here (default 198.18.0.0/16, RFC 2544)
	Seed   int64        // default seed of every link direction that sets none
	// Hosts is HostsShared (the sites share the machine's CPU) or
	// HostsIsolated (every site has a CPU budget: Site.CPUCores).
	Hosts string
	// An isolated lab's division: the machine's cores it was made from,
	// and the cores kept for replab's own process.
	MachineCores float64
	ReserveCores float64
}

// Site is one [site.NAME] table: a network namespace.
type Site struct {
	Name    string     // [a-z0-9-], 1..15 chars
	Address netip.Addr // explicit or allocated from Lab.Subnet in declaration order (.1, .2, …)
	TCP     TCP
	// CPUCores limits the site's processes to this many cores (cgroup CFS
	// quota); 0 means unlimited. In an isolated lab every site has one:
	// its own cpu, or its budget (CPUBudget).
	CPUCores float64
	// Weight is the site's share of the machine in an isolated lab (1
	// unless written; 0 in a shared one); CPUBudget says CPUCores is the
	// budget it gave.
	Weight    float64
	CPUBudget bool
	// MemoryBytes limits the site's processes' memory (cgroup); 0 means unlimited.
	MemoryBytes int64
	Line        int // line of the [site.NAME] header, for later error messages
}

// TCP holds per-site TCP sysctls. Zero values mean "leave the kernel default".
type TCP struct {
	Congestion         string   // default "cubic"; "reno", "bbr", "cubic", … as the kernel allows
	Rmem               [3]int64 // net.ipv4.tcp_rmem min default max (bytes); zero = untouched
	Wmem               [3]int64 // net.ipv4.tcp_wmem
	RmemMax            int64    // net.core.rmem_max (global: applied as the lab-wide maximum)
	WmemMax            int64    // net.core.wmem_max (global)
	WindowScaling      *bool    // net.ipv4.tcp_window_scaling
	SlowStartAfterIdle *bool    // net.ipv4.tcp_slow_start_after_idle

	// The TCP of older stacks (tcp.go): the initial congestion window in
	// segments and the least retransmission timeout, attributes of the
	// site's routes (0: the kernel's 10 segments and 200 ms); SACK,
	// timestamps and the later loss recovery, the namespace's sysctls.
	InitCwnd     int           // route initcwnd
	RTOMin       time.Duration // route rto_min, whole milliseconds
	SACK         *bool         // net.ipv4.tcp_sack
	Timestamps   *bool         // net.ipv4.tcp_timestamps
	FRTO         *int          // net.ipv4.tcp_frto (0–2)
	EarlyRetrans *int          // net.ipv4.tcp_early_retrans (0–4): tail loss probes
	Recovery     *int          // net.ipv4.tcp_recovery (bit mask): RACK
	// Preset names the tcp preset the site started from ("1999"), if any.
	Preset string
}

// Link is one [[link]] table: two directions between two sites.
// Forward is Sites[0] -> Sites[1], Reverse is Sites[1] -> Sites[0].
type Link struct {
	A, B    string
	Preset  string // name of the preset it started from, if any
	Forward linkem.Params
	Reverse linkem.Params
	// Capture records both directions to pcap files for the lab's whole
	// life (capture = true); CaptureBytes is their snap length, 0 for
	// pcap.DefaultSnapLen.
	Capture      bool
	CaptureBytes int
	Line         int
}

// Name returns "A<->B".
func (l Link) Name() string { return l.A + "<->" + l.B }

// Fault is one [[fault]] table: something that breaks At into the measure
// phase and, with For, is healed that much later. It acts on a link (Link
// set), a node (Node set) or a site (Site set); its kind (Kind) says what
// it does, and Act is the fault as its kind read it.
type Fault struct {
	At  time.Duration // into the measure phase
	For time.Duration // 0: not healed by the schedule (a kill stays killed, a link change stays)

	// A link: From->To, and To->From as well when Both (written "a<->b";
	// "a->b" is one direction).
	Link     string // as written
	From, To string
	Both     bool
	// A node; Stage, when set, is one of its replication stages (the
	// pipeline's "extract", "pump", "collector", "replicat"), whose
	// processes the fault acts on instead of the node's server.
	Node  string
	Stage string
	// A site.
	Site string

	// Kind is the fault's kind (internal/faultkind): what do says
	// ("kill", "isolate", "flap"), or faultkind.SetName for a link fault
	// with set.
	Kind string
	// Act is the fault as its kind read it, with its kind's own keys (a
	// link fault's changes, a flap's every and down): it applies, heals
	// and describes itself.
	Act faultkind.Fault

	Line int // of the [[fault]] header
}

// Describe is the fault in a few words, as faults.csv and the report say
// it: "link primary<->eu set down", "node e1 kill", "site eu isolate".
func (f Fault) Describe() string {
	if f.Act == nil {
		return ""
	}
	return f.Act.Describe()
}

// Workload is the [workload] table: a kind and its options, which the
// workload checks itself (pointing at them with Spec.Errorf("workload.KEY")).
type Workload struct {
	Kind    string
	Options map[string]any // TOML values as parsed: string, int64, float64, bool
}

// Run is the [run] table: how the driver runs the workload.
type Run struct {
	Users    int           // closed loop: concurrent users; open loop: most transactions in flight
	Warmup   time.Duration // not measured
	Duration time.Duration // the measure phase
	Cooldown time.Duration // not measured; replicas keep catching up
	// Transactions > 0 ends the measure phase once that many transactions
	// started in it have finished (pgbench's -t, over all users), or at
	// Duration if that comes first. Closed loop only.
	Transactions int64
	// RatePerSec > 0 switches to open loop: transactions start on a
	// schedule, and latency counts from the scheduled start.
	RatePerSec float64
	Arrival    string        // open loop: "poisson" (default) or "regular"
	ThinkMin   time.Duration // closed loop: think time between transactions,
	ThinkMax   time.Duration // drawn uniformly from [ThinkMin, ThinkMax]
	Seed       int64         // data and choices
	Client     string        // site the users run in; "" = the first source's site
	// MaxErrorPct stops a run whose failed transactions exceed this share
	// (of all attempts in the last second).
	MaxErrorPct float64
	LagInterval time.Duration // how often each replica's watcher looks
	// Metrics, when set, is where live metrics are served ("host:port").
	Metrics string
	// LagSample says which transactions replication lag is measured for.
	// LagSampleAll (lag_sample = "all"): every transaction,
	// by its commit position, at each replica where the engine has
	// positions (engine.Positions); elsewhere as LagSampleAuto. Otherwise
	// every replica reads stamps: every LagSample-th transaction of each
	// user is stamped (1 = every transaction), or with LagSampleAuto
	// (lag_sample = "auto") the driver chooses N for a bounded number of
	// stamped transactions per second (driver.Config.LagEvery), the
	// default: "all" costs more than the 3 % of throughput a default may
	// (bench/driver lag-all).
	LagSample int

	// Verify journals every writing transaction's key and looks for every
	// acknowledged one at every node after the run (docs/faults.md). It
	// defaults to on when the spec has [[fault]]s (see Spec.VerifyOn).
	Verify bool

	// History records every operation the users issue (history.jsonl) and
	// checks it after the run (docs/consistency.md). The workloads made
	// for checking turn it on unless it is written false (see
	// Spec.HistoryOn).
	History bool

	// Provision says over which links the lab is built and loaded: the
	// configured ones (ProvisionLink), unshaped ones with the configured
	// conditions applied when the measurement starts (ProvisionFast), or
	// unshaped ones only when copying across the configured ones would
	// take long (ProvisionAuto, the default).
	Provision string

	// Repetitions runs the measurement this many times (default 1). With
	// Confidence > 0 it is the pilot, and more repetitions follow until the
	// mean tpm is known within RelativeError at that confidence level, or
	// MaxRepetitions is reached (Jain's method).
	Repetitions    int
	Confidence     float64
	RelativeError  float64
	MaxRepetitions int

	// Search, when set, raises the load step by step until the
	// configuration is exhausted ([run] search; docs/run.md).
	Search *Search
	// LinkSearch, when set, searches a link's parameter for the least link
	// that keeps a bound ([run] search = "link[N].rate"; docs/run.md).
	LinkSearch *LinkSearch
}

// Search is a saturation search: the same lab measured at each step of
// load in turn, until a step no longer scales.
type Search struct {
	By    string    // SearchUsers (closed loop) or SearchRate (open loop)
	Steps []float64 // increasing: users, or transactions per second
	// A step is exhausted when its throughput rose by less than
	// MinEfficiency of the load's relative rise over the step before, its
	// commit latency p99 passed MaxP99 (0: no bound), or more than
	// MaxErrorPct of its transactions failed.
	MinEfficiency float64
	MaxP99        time.Duration
	MaxErrorPct   float64
	// Refine is how many loads to probe between the knee and the exhaust
	// point once the steps found them, each halving the bracket (0: none).
	Refine int
	Line   int
}

// Saturation search kinds and defaults.
const (
	SearchUsers = "users"
	SearchRate  = "rate"
	// DefaultSearchMinEfficiency: throughput must rise by at least half
	// as much as the load did.
	DefaultSearchMinEfficiency = 0.5
	DefaultSearchMaxErrorPct   = 1
	// MaxSearchRefine caps search_refine: 20 halvings narrow any bracket
	// of steps to a millionth of it.
	MaxSearchRefine = 20
)

// DefaultSearchUsers are the storage study's loads (3, 30, 300 users) and
// the steps between.
var DefaultSearchUsers = []float64{3, 10, 30, 100, 300}

// Run defaults.
const (
	DefaultUsers       = 8
	DefaultWarmup      = 5 * time.Second
	DefaultDuration    = 30 * time.Second
	DefaultCooldown    = 2 * time.Second
	DefaultMaxErrorPct = 20
	DefaultLagInterval = time.Millisecond
	// DefaultPilot is how many repetitions estimate the spread before
	// Jain's formula decides how many more a confidence target needs.
	DefaultPilot          = 3
	DefaultMaxRepetitions = 30
	// LagSampleAuto is Run.LagSample for lag_sample = "auto", LagSampleAll
	// for "all".
	LagSampleAuto = 0
	LagSampleAll  = -1
	MaxLagSample  = 1000000
)

// Run.Provision values.
const (
	ProvisionAuto = "auto"
	ProvisionFast = "fast"
	ProvisionLink = "link"
)

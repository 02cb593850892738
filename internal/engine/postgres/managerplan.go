package postgres

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"replab/internal/spec"
)

// The HA managers' keys in [scheme] (docs/failover.md): which manager runs
// the cluster, where its store's members are, how clients find the
// primary, and the manager's own knobs, passed through.

// Managers.
const (
	ManagerNone    = "none"             // replab itself: promote faults (failover.go)
	ManagerPatroni = "patroni"          // Patroni with etcd as its store (patroni.go, etcd.go)
	ManagerRepmgr  = "repmgr"           // repmgrd on every node (repmgr.go)
	ManagerPgAF    = "pg_auto_failover" // pg_autoctl on every node, a monitor node (pgautofailover.go)
)

var managers = []string{ManagerNone, ManagerPatroni, ManagerRepmgr, ManagerPgAF}

// Routes: how clients find the node that takes writes.
const (
	RouteDirect  = "direct"  // a fixed node: the one the cluster says takes writes when the user connects
	RouteLibpq   = "libpq"   // every node in one host list, target_session_attrs=read-write
	RouteHAProxy = "haproxy" // haproxy in the clients' site, checking Patroni's REST API or pg_auto_failover's monitor (haproxy.go)
)

var routes = []string{RouteDirect, RouteLibpq, RouteHAProxy}

// Patroni's defaults (Patroni 3.0.2's own): what a spec that says nothing
// runs with.
const (
	defaultTTL          = 30 * time.Second
	defaultLoopWait     = 10 * time.Second
	defaultRetryTimeout = 10 * time.Second
	defaultMaxLag       = 1 << 20 // maximum_lag_on_failover, bytes
)

// managerPlan is the manager's part of the plan; nil without a manager.
type managerPlan struct {
	kind string
	// storeSites have one etcd member each, in the spec's order.
	storeSites []string
	// Patroni's knobs (whole seconds, as Patroni takes them).
	ttl, loopWait, retryTimeout time.Duration
	maxLag                      int64 // maximum_lag_on_failover, bytes
	syncMode, syncStrict        bool
	// noFailover are standbys Patroni never promotes (tag nofailover);
	// noSync standbys it never makes synchronous (tag nosync).
	noFailover, noSync []string
	// Patroni's answers to a pg_rewind that failed and to a node whose
	// timeline diverged: remove its data directory and copy the leader
	// again (off by default: the node stays down).
	removeOnRewindFailure, removeOnDivergedTimelines bool

	// repmgr's knobs: failover (automatic or manual), how often and how
	// far apart repmgrd tries the primary again before it elects, how
	// often it monitors, each node's priority (0: never promoted), the
	// nodes' location (repmgr does not fail over when no node of the
	// primary's location is visible), and what replab's heal of a failed
	// primary does (rejoin: "rewind", repmgr node rejoin --force-rewind
	// as an operator would; "none": start it as it was).
	failover          string
	reconnectAttempts int64
	reconnectInterval time.Duration
	monitorInterval   time.Duration
	priority          map[string]int64 // also pg_auto_failover's candidate priorities
	locationBySite    bool
	rejoin            string

	// pg_auto_failover's knobs: the monitor's site; how many standbys
	// each commit waits for (-1: pg_auto_failover's own choice); which
	// standbys take part in the replication quorum; the monitor's health
	// checks and timeouts (node_considered_unhealthy_timeout,
	// primary_demote_timeout) and the keeper's network_partition_timeout
	// (whole seconds), after which a primary that reaches neither the
	// monitor nor a standby demotes itself.
	monitorSite        string
	numberSyncStandbys int64
	quorum             map[string]bool
	healthCheckPeriod  time.Duration
	healthCheckTimeout time.Duration
	healthCheckRetries int64
	healthCheckDelay   time.Duration
	unhealthyTimeout   time.Duration
	demoteTimeout      time.Duration
	partitionTimeout   time.Duration
	// walSenderTimeout is the servers' wal_sender_timeout (0: pg_auto_
	// failover's 30 s): a primary cut off counts itself alone only once
	// its walsenders have timed out.
	walSenderTimeout time.Duration
}

// pg_auto_failover 2.0's defaults (its monitor's GUCs and its keeper's
// configuration).
const (
	pgafHealthCheckPeriod  = 5 * time.Second
	pgafHealthCheckTimeout = 5 * time.Second
	pgafHealthCheckRetries = 2
	pgafHealthCheckDelay   = 2 * time.Second
	pgafUnhealthyTimeout   = 20 * time.Second
	pgafDemoteTimeout      = 30 * time.Second
	pgafPartitionTimeout   = 20 * time.Second
	pgafWalSenderTimeout   = 30 * time.Second
	pgafPriority           = 50
)

// electionBound is how long the cluster may go without a primary before
// replab says the manager did not elect one: the leader key's expiry, a
// loop to notice, the retries, and time for the promotion itself.
func (m *managerPlan) electionBound() time.Duration {
	if m.kind == ManagerPgAF {
		return m.unhealthyTimeout + m.healthCheckPeriod + m.healthCheckTimeout +
			time.Duration(m.healthCheckRetries)*(m.healthCheckTimeout+m.healthCheckDelay) + m.demoteTimeout + 30*time.Second
	}
	if m.kind == ManagerRepmgr {
		return time.Duration(m.reconnectAttempts)*m.reconnectInterval + 2*m.monitorInterval + 30*time.Second
	}
	return m.ttl + 2*m.loopWait + 2*m.retryTimeout + 30*time.Second
}

// boundWords says what electionBound adds up, for its error.
func (m *managerPlan) boundWords() string {
	if m.kind == ManagerPgAF {
		return "node_considered_unhealthy_timeout + the health checks with their retries + primary_demote_timeout + 30 s"
	}
	if m.kind == ManagerRepmgr {
		return "reconnect_attempts × reconnect_interval + 2 monitor_interval + 30 s"
	}
	return "ttl + 2 loop_wait + 2 retry_timeout + 30 s"
}

// readManager reads manager, route, store_sites and the manager's knobs
// from o into p, reporting problems through errs.
func readManager(s *spec.Spec, o *spec.Options, errs *spec.Errors, p *plan) {
	kind := o.String("manager", ManagerNone)
	if !slices.Contains(managers, kind) {
		errs.Add("scheme.manager", "unknown manager %q%s; managers: %s", kind, spec.DidYouMean(kind, managers), strings.Join(managers, ", "))
		kind = ManagerNone
	}
	physical := p.replication == Async || p.replication == Sync
	p.route = o.String("route", "", routes...)
	if p.route == "" {
		p.route = RouteDirect
		if kind != ManagerNone {
			p.route = RouteLibpq
		}
	}
	if p.route != RouteDirect && !physical {
		errs.Add("scheme.route", "route = %q finds a primary among physical standbys; replication = %q has none (leave route out)", p.route, p.replication)
	}
	// Each manager's own knobs; a knob of another manager is refused.
	knobs := map[string][]string{
		ManagerPatroni: {"store_sites", "ttl", "loop_wait", "retry_timeout", "maximum_lag_on_failover", "synchronous_mode", "synchronous_mode_strict", "nofailover", "nosync",
			"remove_data_directory_on_rewind_failure", "remove_data_directory_on_diverged_timelines"},
		ManagerRepmgr: {"failover", "reconnect_attempts", "reconnect_interval", "monitor_interval", "priority", "location", "rejoin"},
		ManagerPgAF: {"monitor_site", "number_sync_standbys", "replication_quorum", "priority", "health_check_period", "health_check_timeout",
			"health_check_max_retries", "health_check_retry_delay", "node_considered_unhealthy_timeout", "primary_demote_timeout", "network_partition_timeout",
			"wal_sender_timeout"},
	}
	refused := map[string]bool{}
	for _, of := range managers[1:] {
		if of == kind {
			continue
		}
		for _, k := range knobs[of] {
			if refused[k] || slices.Contains(knobs[kind], k) || !o.Has(k) {
				continue
			}
			refused[k] = true
			var owners []string
			for _, m := range managers[1:] {
				if slices.Contains(knobs[m], k) {
					owners = append(owners, fmt.Sprintf("%q", m))
				}
			}
			if kind == ManagerNone {
				errs.Add("scheme."+k, "%s is a knob of manager = %s; this spec has no manager", k, strings.Join(owners, " or "))
			} else {
				errs.Add("scheme."+k, "%s is a knob of manager = %s, not of %q", k, strings.Join(owners, " or "), kind)
			}
		}
	}
	if kind == ManagerNone {
		return
	}
	if kind == ManagerPgAF {
		readPgAF(s, o, errs, p)
		return
	}
	if kind == ManagerRepmgr {
		readRepmgr(s, o, errs, p)
		return
	}
	if !physical {
		errs.Add("scheme.replication", "manager = %q runs physical streaming replication: use replication = \"async\" or \"sync\"", kind)
	}
	m := &managerPlan{kind: kind}
	p.manager = m
	seconds := func(key string, def, lo time.Duration) time.Duration {
		d := o.Duration(key, def, lo, time.Hour)
		if d%time.Second != 0 {
			o.Errorf(key, "Patroni takes whole seconds: write %q", (d + time.Second - 1).Truncate(time.Second).String())
		}
		return d
	}
	m.ttl = seconds("ttl", defaultTTL, 2*time.Second)
	m.loopWait = seconds("loop_wait", defaultLoopWait, time.Second)
	m.retryTimeout = seconds("retry_timeout", defaultRetryTimeout, time.Second)
	if need := m.loopWait + 2*m.retryTimeout; m.ttl < need {
		errs.Add("scheme.ttl", "ttl = %s is shorter than loop_wait + 2 × retry_timeout (%s): the leader could lose its key before it notices and demotes itself; raise ttl or lower the others", m.ttl, need)
	}
	m.maxLag = o.Size("maximum_lag_on_failover", defaultMaxLag, 0, 1<<50)
	m.syncMode = p.replication == Sync
	if b := o.Bool("synchronous_mode"); b != nil {
		if *b != m.syncMode {
			want := "sync"
			if !*b {
				want = "async"
			}
			errs.Add("scheme.synchronous_mode", "synchronous_mode = %t contradicts replication = %q: write replication = %q (Patroni's synchronous_mode is replab's sync)", *b, p.replication, want)
		}
	}
	if b := o.Bool("synchronous_mode_strict"); b != nil {
		m.syncStrict = *b
		if m.syncStrict && !m.syncMode {
			errs.Add("scheme.synchronous_mode_strict", "synchronous_mode_strict needs synchronous_mode: write replication = \"sync\"")
		}
	}
	if b := o.Bool("remove_data_directory_on_rewind_failure"); b != nil {
		m.removeOnRewindFailure = *b
	}
	if b := o.Bool("remove_data_directory_on_diverged_timelines"); b != nil {
		m.removeOnDivergedTimelines = *b
	}
	var nodeNames, sites []string
	for _, n := range s.Nodes {
		nodeNames = append(nodeNames, n.Name)
		if !slices.Contains(sites, n.Site) {
			sites = append(sites, n.Site)
		}
	}
	for _, name := range o.Strings("nofailover") {
		n := s.Node(name)
		switch {
		case n == nil:
			errs.Add("scheme.nofailover", "unknown node %q%s; nodes: %s", name, spec.DidYouMean(name, nodeNames), strings.Join(nodeNames, ", "))
		case n.Role == "primary":
			errs.Add("scheme.nofailover", "node %s is the primary: nofailover names standbys that must never be promoted", name)
		default:
			m.noFailover = append(m.noFailover, name)
		}
	}
	for _, name := range o.Strings("nosync") {
		n := s.Node(name)
		switch {
		case n == nil:
			errs.Add("scheme.nosync", "unknown node %q%s; nodes: %s", name, spec.DidYouMean(name, nodeNames), strings.Join(nodeNames, ", "))
		case !m.syncMode:
			errs.Add("scheme.nosync", "nosync keeps a standby asynchronous under synchronous_mode: write replication = \"sync\"")
		default:
			m.noSync = append(m.noSync, name)
		}
	}
	if m.syncMode && len(m.noSync) > 0 && len(m.noSync) >= len(s.Nodes)-1 {
		errs.Add("scheme.nosync", "every standby is nosync: none could be synchronous (with the primary among them, after a failover at most %d could)", len(s.Nodes)-1-len(m.noSync))
	}
	if len(m.noFailover) > 0 && len(m.noFailover) == len(s.Nodes)-1 {
		errs.Add("scheme.nofailover", "every standby is nofailover: Patroni could never fail over")
	}
	var all []string
	for _, st := range s.Sites {
		all = append(all, st.Name)
	}
	if o.Has("store_sites") {
		for _, st := range o.Strings("store_sites") {
			switch {
			case !slices.Contains(all, st):
				errs.Add("scheme.store_sites", "unknown site %q%s; sites: %s", st, spec.DidYouMean(st, all), strings.Join(all, ", "))
			case slices.Contains(m.storeSites, st):
				errs.Add("scheme.store_sites", "site %s is named twice: the store has one member per site", st)
			default:
				m.storeSites = append(m.storeSites, st)
			}
		}
		if len(m.storeSites) == 0 && len(o.Strings("store_sites")) == 0 {
			errs.Add("scheme.store_sites", "the store needs at least one member: name the sites that run one")
		}
	} else {
		m.storeSites = sites
	}
	if n := len(m.storeSites); n > 0 && n%2 == 0 {
		errs.Warn("scheme.store_sites", "%d store members tolerate no more failures than %d: a partition into two halves leaves no majority", n, n-1)
	}
}

// readRepmgr reads repmgr's knobs.
func readRepmgr(s *spec.Spec, o *spec.Options, errs *spec.Errors, p *plan) {
	m := &managerPlan{kind: ManagerRepmgr}
	p.manager = m
	switch p.replication {
	case Async:
	case Sync:
		errs.Add("scheme.replication", "repmgr does not manage synchronous replication (after a failover nothing would make a standby synchronous): use replication = \"async\", or manager = \"patroni\" for synchronous_mode")
	default:
		errs.Add("scheme.replication", "manager = \"repmgr\" runs physical streaming replication: use replication = \"async\"")
	}
	if p.route == RouteHAProxy {
		errs.Add("scheme.route", `route = "haproxy" health-checks Patroni's REST API or pg_auto_failover's monitor; repmgr has neither: use route = "libpq"`)
	}
	seconds := func(key string, def, lo time.Duration) time.Duration {
		d := o.Duration(key, def, lo, time.Hour)
		if d%time.Second != 0 {
			o.Errorf(key, "repmgr takes whole seconds: write %q", (d + time.Second - 1).Truncate(time.Second).String())
		}
		return d
	}
	// repmgr 5.3's defaults.
	m.failover = o.String("failover", "automatic", "automatic", "manual")
	m.reconnectAttempts = o.Int("reconnect_attempts", 6, 1, 1000)
	m.reconnectInterval = seconds("reconnect_interval", 10*time.Second, time.Second)
	m.monitorInterval = seconds("monitor_interval", 2*time.Second, time.Second)
	loc := o.String("location", "same", "same", "site")
	m.locationBySite = loc == "site"
	m.rejoin = o.String("rejoin", "rewind", "rewind", "none")
	var nodeNames []string
	for _, n := range s.Nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	m.priority = o.IntTable("priority", 0, 1000000)
	for name := range m.priority {
		if s.Node(name) == nil {
			errs.Add("scheme.priority", "unknown node %q%s; nodes: %s", name, spec.DidYouMean(name, nodeNames), strings.Join(nodeNames, ", "))
		}
	}
	candidates := 0
	for _, n := range s.Nodes {
		if n.Role == "standby" {
			if pr, ok := m.priority[n.Name]; !ok || pr > 0 {
				candidates++
			}
		}
	}
	if m.failover == "automatic" && candidates == 0 && len(s.Nodes) > 1 && p.replication == Async {
		errs.Add("scheme.priority", "every standby has priority 0: repmgr could never promote one")
	}
}

// readPgAF reads pg_auto_failover's knobs.
func readPgAF(s *spec.Spec, o *spec.Options, errs *spec.Errors, p *plan) {
	m := &managerPlan{kind: ManagerPgAF, numberSyncStandbys: -1}
	p.manager = m
	sync := p.replication == Sync
	if p.replication != Async && !sync {
		errs.Add("scheme.replication", "manager = \"pg_auto_failover\" runs physical streaming replication: use replication = \"async\" or \"sync\"")
	}
	var sites, nodeNames []string
	for _, st := range s.Sites {
		sites = append(sites, st.Name)
	}
	for _, n := range s.Nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	m.monitorSite = o.String("monitor_site", "")
	switch {
	case m.monitorSite == "":
		errs.Add("scheme.manager", "pg_auto_failover needs its monitor: name the site it runs in (monitor_site = %q, or a site of its own); sites: %s", firstOr(sites, "…"), strings.Join(sites, ", "))
	case !slices.Contains(sites, m.monitorSite):
		errs.Add("scheme.monitor_site", "unknown site %q%s; sites: %s", m.monitorSite, spec.DidYouMean(m.monitorSite, sites), strings.Join(sites, ", "))
	}
	// The monitor's GUCs are milliseconds; the keeper's timeout seconds.
	millis := func(key string, def, lo time.Duration) time.Duration {
		d := o.Duration(key, def, lo, time.Hour)
		if d%time.Millisecond != 0 {
			o.Errorf(key, "pg_auto_failover takes whole milliseconds: write %q", d.Round(time.Millisecond).String())
		}
		return d
	}
	m.healthCheckPeriod = millis("health_check_period", pgafHealthCheckPeriod, 100*time.Millisecond)
	m.healthCheckTimeout = millis("health_check_timeout", pgafHealthCheckTimeout, 100*time.Millisecond)
	m.healthCheckRetries = o.Int("health_check_max_retries", pgafHealthCheckRetries, 1, 100)
	m.healthCheckDelay = millis("health_check_retry_delay", pgafHealthCheckDelay, time.Millisecond)
	m.unhealthyTimeout = millis("node_considered_unhealthy_timeout", pgafUnhealthyTimeout, time.Second)
	m.demoteTimeout = millis("primary_demote_timeout", pgafDemoteTimeout, time.Second)
	m.partitionTimeout = o.Duration("network_partition_timeout", pgafPartitionTimeout, time.Second, time.Hour)
	if m.partitionTimeout%time.Second != 0 {
		o.Errorf("network_partition_timeout", "pg_autoctl takes whole seconds: write %q", (m.partitionTimeout + time.Second - 1).Truncate(time.Second).String())
	}
	if o.Has("wal_sender_timeout") {
		m.walSenderTimeout = millis("wal_sender_timeout", pgafWalSenderTimeout, time.Second)
	}
	// A primary cut off from the monitor and from its standbys demotes
	// itself network_partition_timeout after its walsenders are gone
	// (wal_sender_timeout); the monitor may promote another once the
	// primary has been unhealthy for node_considered_unhealthy_timeout
	// and primary_demote_timeout has passed. pg_auto_failover's own
	// defaults (30 + 20 s against 20 + 30 s) leave no margin.
	wst := m.walSenderTimeout
	if wst == 0 {
		wst = pgafWalSenderTimeout
	}
	if alone, limit := wst+m.partitionTimeout, m.unhealthyTimeout+m.demoteTimeout; alone >= limit {
		errs.Warn("scheme.network_partition_timeout", "a primary cut off demotes itself after wal_sender_timeout + network_partition_timeout (%s), the monitor may promote another after node_considered_unhealthy_timeout + primary_demote_timeout (%s): two primaries meanwhile (the cut one's commits wait while a standby is in the quorum)", alone, limit)
	}
	m.priority = o.IntTable("priority", 0, 100)
	for name := range m.priority {
		if s.Node(name) == nil {
			errs.Add("scheme.priority", "unknown node %q%s; nodes: %s", name, spec.DidYouMean(name, nodeNames), strings.Join(nodeNames, ", "))
		}
	}
	m.quorum = o.BoolTable("replication_quorum")
	for _, name := range slices.Sorted(maps.Keys(m.quorum)) {
		n := s.Node(name)
		switch {
		case n == nil:
			errs.Add("scheme.replication_quorum", "unknown node %q%s; nodes: %s", name, spec.DidYouMean(name, nodeNames), strings.Join(nodeNames, ", "))
		case m.quorum[name] && !sync:
			errs.Add("scheme.replication_quorum", "node %s in the replication quorum makes commits wait for it: write replication = \"sync\" (with \"async\" no standby is in it)", name)
		}
	}
	candidates, inQuorum := 0, 0
	for _, n := range s.Nodes {
		if n.Role != "standby" {
			continue
		}
		if pr, ok := m.priority[n.Name]; !ok || pr > 0 {
			candidates++
		}
		if m.inQuorum(n.Name, sync) {
			inQuorum++
		}
	}
	if candidates == 0 && len(s.Nodes) > 1 {
		errs.Add("scheme.priority", "every standby has priority 0: pg_auto_failover could never promote one")
	}
	if sync && inQuorum == 0 && len(s.Nodes) > 1 {
		errs.Add("scheme.replication_quorum", "no standby is in the replication quorum: none would be synchronous; write replication = \"async\", or leave a standby in it")
	}
	if o.Has("number_sync_standbys") {
		m.numberSyncStandbys = o.Int("number_sync_standbys", 0, 0, 100)
		switch {
		case !sync:
			errs.Add("scheme.number_sync_standbys", "number_sync_standbys is how many standbys a commit waits for: write replication = \"sync\"")
		case m.numberSyncStandbys > 0 && m.numberSyncStandbys+1 > int64(inQuorum):
			errs.Add("scheme.number_sync_standbys", "number_sync_standbys = %d needs %d standbys in the replication quorum (pg_auto_failover keeps one spare); this cluster has %d", m.numberSyncStandbys, m.numberSyncStandbys+1, inQuorum)
		}
	}
	for _, n := range s.Nodes {
		if len(n.Settings) > 0 {
			errs.Add("node."+n.Name+".settings", "pg_auto_failover copies the primary's configuration files to every standby (pg_basebackup, pg_rewind): node %s's own settings would not stay its own; leave [node.%s.settings] out", n.Name, n.Name)
		}
	}
}

// inQuorum says whether pg_auto_failover counts node name in the
// replication quorum: under replication = "sync" every node unless
// replication_quorum says false; under "async" none.
func (m *managerPlan) inQuorum(name string, sync bool) bool {
	if !sync {
		return false
	}
	q, ok := m.quorum[name]
	return !ok || q
}

// candidatePriority is node name's candidate priority under
// pg_auto_failover (0: never promoted).
func (m *managerPlan) candidatePriority(name string) int64 {
	if p, ok := m.priority[name]; ok {
		return p
	}
	return pgafPriority
}

// checkManagedNodes checks the nodes of a managed cluster: one primary
// (the one that bootstraps), standbys of it, nothing Patroni would not run.
func checkManagedNodes(s *spec.Spec, errs *spec.Errors, p *plan, sc scheme) {
	if p.manager == nil {
		return
	}
	if sc.standbys != "" {
		errs.Add("scheme.standbys", "the manager chooses the synchronous standbys itself: leave standbys out (replication = \"sync\" is its synchronous_mode)")
	}
	for _, n := range s.Nodes {
		field := "node." + n.Name
		if n.Role == "standby" && n.From != "" && !slices.Contains(p.primaries, n.From) {
			errs.Add(field+".from", "manager %s streams every standby from the primary: cascading (from = %q) is not supported; write from = %q", p.manager.kind, n.From, firstOr(p.primaries, "the primary"))
		}
		if n.ApplyDelay > 0 {
			errs.Add(field+".apply_delay", "a delayed standby under manager %s would be a failover candidate that lags on purpose: leave apply_delay out", p.manager.kind)
		}
	}
	if len(s.Nodes) < 2 {
		errs.Add("node", "manager %s fails over to a standby: the cluster needs at least one", p.manager.kind)
	}
}

func firstOr(list []string, def string) string {
	if len(list) > 0 {
		return list[0]
	}
	return def
}

// managerStages are the processes of a managed node that a stage fault
// can act on besides the whole node: the manager alone, or the server
// alone (the manager then starts it again).
func (p *plan) managerStages() []string {
	if p.manager == nil {
		return nil
	}
	switch p.manager.kind {
	case ManagerRepmgr:
		return []string{"repmgrd", "postgres"}
	case ManagerPgAF:
		return []string{"pg_autoctl", "postgres"}
	}
	return []string{p.manager.kind, "postgres"}
}

// describeManager is the manager's configuration in one line, for lab up.
func (m *managerPlan) describe() string {
	if m.kind == ManagerPgAF {
		nss := "pg_auto_failover's choice"
		if m.numberSyncStandbys >= 0 {
			nss = fmt.Sprint(m.numberSyncStandbys)
		}
		wst := "30s (pg_auto_failover's)"
		if m.walSenderTimeout > 0 {
			wst = m.walSenderTimeout.String()
		}
		return fmt.Sprintf("pg_auto_failover: monitor in %s; health checks every %s (timeout %s, %d retries %s apart), node_considered_unhealthy_timeout %s, primary_demote_timeout %s, network_partition_timeout %s, wal_sender_timeout %s; number_sync_standbys %s",
			m.monitorSite, m.healthCheckPeriod, m.healthCheckTimeout, m.healthCheckRetries, m.healthCheckDelay, m.unhealthyTimeout, m.demoteTimeout, m.partitionTimeout, wst, nss)
	}
	sync := "asynchronous"
	if m.syncMode {
		sync = "synchronous_mode"
		if m.syncStrict {
			sync += " (strict)"
		}
	}
	var remove []string
	if m.removeOnRewindFailure {
		remove = append(remove, "a failed rewind")
	}
	if m.removeOnDivergedTimelines {
		remove = append(remove, "diverged timelines")
	}
	copyAgain := ""
	if len(remove) > 0 {
		copyAgain = "; a new copy after " + strings.Join(remove, " or ")
	}
	return fmt.Sprintf("%s: ttl %s, loop_wait %s, retry_timeout %s, maximum_lag_on_failover %d bytes, %s%s; store: etcd in %s",
		m.kind, m.ttl, m.loopWait, m.retryTimeout, m.maxLag, sync, copyAgain, strings.Join(m.storeSites, ", "))
}

package mariadb

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/internal/spec"
)

// Scheme names (docs/mariadb.md maps them to MariaDB settings).
const (
	Async       = "async"       // binlog + GTID replicas, cascading allowed
	Semisync    = "semisync"    // async plus semi-synchronous acknowledgement by the direct replicas
	Multimaster = "multimaster" // masters replicating in a ring (two-way for two)
	Galera      = "galera"      // synchronous multi-master (Galera 4), every node a master
)

var schemes = []string{Async, Semisync, Multimaster, Galera}

var (
	waitPoints   = []string{"after_sync", "after_commit"}
	parModes     = []string{"none", "minimal", "conservative", "optimistic", "aggressive"}
	durabilities = []string{"sync", "write-nosync", "nosync"}
)

var sizeRE = regexp.MustCompile(`^[0-9]+[KMGkmg]?$`)

// plan is a spec resolved for MariaDB: every default filled in.
type plan struct {
	replication string
	sources     []string // the primary, or every master in ring order
	// Semi-sync.
	waitPoint string        // AFTER_SYNC or AFTER_COMMIT
	timeout   time.Duration // rpl_semi_sync_master_timeout
	// Parallel apply at replicas.
	parThreads int64
	parMode    string // "" = the server's default
	// Durability.
	flushLog   int64 // innodb_flush_log_at_trx_commit
	syncBinlog int64 // sync_binlog
	// Galera.
	syncWait int64  // wsrep_sync_wait
	fcLimit  int64  // gcs.fc_limit (0: Galera's default)
	fcFactor string // gcs.fc_factor ("": Galera's default)
	gcache   string // gcache.size
	provider string // more wsrep_provider_options, as written
}

// makePlan validates s for MariaDB and resolves its defaults. Every
// [scheme] key but replication is MariaDB's own.
func makePlan(s *spec.Spec) (*plan, error) {
	errs := s.NewErrors()
	o := s.SchemeOptions("engine mariadb")
	p := &plan{replication: s.Scheme.Replication}
	if p.replication == "" {
		p.replication = Async
	}
	if !slices.Contains(schemes, p.replication) {
		errs.Add("scheme.replication", "MariaDB has no scheme %q%s; schemes: %s", p.replication, spec.DidYouMean(p.replication, schemes), strings.Join(schemes, ", "))
		return nil, errs.Err()
	}
	wait := o.String("wait_point", "", waitPoints...)
	timeout := o.Duration("timeout", 0, time.Millisecond, time.Hour)
	p.parThreads = o.Int("parallel_threads", 0, 0, 256)
	p.parMode = o.String("parallel_mode", "", parModes...)
	dur := o.String("durability", "sync", durabilities...)
	flush := o.Int("flush_log_at_trx_commit", -1, 0, 2)
	syncBin := o.Int("sync_binlog", -1, 0, 1_000_000)
	p.syncWait = o.Int("sync_wait", 0, 0, 15)
	p.fcLimit = o.Int("fc_limit", 0, 1, 1<<31-1)
	p.fcFactor = o.String("fc_factor", "")
	p.gcache = o.String("gcache_size", "64M")
	p.provider = o.String("provider_options", "")
	errs.Join(o.Err())
	if f, err := strconv.ParseFloat(p.fcFactor, 64); p.fcFactor != "" && (err != nil || f < 0 || f > 1) {
		errs.Add("scheme.fc_factor", "want a fraction from 0 to 1 as a string, like \"0.8\"")
	}
	if !sizeRE.MatchString(p.gcache) {
		errs.Add("scheme.gcache_size", "want a size like \"64M\" or \"1G\"")
	}
	if p.replication != Galera {
		for _, k := range []string{"sync_wait", "fc_limit", "fc_factor", "gcache_size", "provider_options"} {
			if o.Has(k) {
				errs.Add("scheme."+k, "%s is a Galera setting; it needs replication = \"galera\"", k)
			}
		}
	}

	// Semi-sync options belong to semisync.
	if p.replication != Semisync {
		for _, k := range []string{"wait_point", "timeout"} {
			if o.Has(k) {
				errs.Add("scheme."+k, "%s is a semi-synchronous setting; it needs replication = \"semisync\"", k)
			}
		}
	}
	p.waitPoint = strings.ToUpper(wait)
	if p.waitPoint == "" {
		p.waitPoint = "AFTER_SYNC"
	}
	p.timeout = timeout
	if p.timeout == 0 {
		p.timeout = 10 * time.Second // MariaDB's default
	}
	if p.parMode != "" && p.parThreads == 0 {
		errs.Add("scheme.parallel_mode", "parallel_mode applies to parallel apply; set parallel_threads too (0 applies serially)")
	}

	// Durability: a word, then the two settings as written.
	switch dur {
	case "sync": // the redo log and the binlog flushed at every commit
		p.flushLog, p.syncBinlog = 1, 1
	case "write-nosync": // written at commit, flushed about once a second
		p.flushLog, p.syncBinlog = 2, 0
	case "nosync": // not even written at commit
		p.flushLog, p.syncBinlog = 0, 0
	}
	if flush >= 0 {
		p.flushLog = flush
	}
	if syncBin >= 0 {
		p.syncBinlog = syncBin
	}

	var replicas, masters, primaries []string
	for _, n := range s.Nodes {
		field := "node." + n.Name
		switch n.Role {
		case "primary":
			primaries = append(primaries, n.Name)
		case "replica", "standby":
			replicas = append(replicas, n.Name)
			if n.From == "" {
				errs.Add(field+".from", "a %s replicates from another node: name it with from = \"…\"", n.Role)
			}
		case "master":
			masters = append(masters, n.Name)
		}
		if n.ApplyDelay > 0 {
			errs.Add(field+".apply_delay", "apply_delay is not supported by the MariaDB engine yet (MASTER_DELAY counts whole seconds)")
		}
		if len(n.Tables) > 0 {
			errs.Add(field+".table", "the MariaDB engine replicates whole databases; table filters are not supported")
		}
		if n.From != "" && n.Role != "replica" && n.Role != "standby" {
			errs.Add(field+".from", "only replicas name an upstream; a %s receives from no one here (masters form a ring in spec order)", n.Role)
		}
		if n.From == n.Name && n.From != "" {
			errs.Add(field+".from", "node %s cannot replicate from itself", n.Name)
		}
	}
	roleErr := func(names []string, role, hint string) {
		for _, n := range names {
			errs.Add("node."+n+".role", "replication = %q has no %s nodes; %s", p.replication, role, hint)
		}
	}
	switch p.replication {
	case Async, Semisync:
		roleErr(masters, "master", `use replication = "multimaster" for masters`)
		if len(primaries) != 1 {
			errs.Add("node", "replication = %q needs exactly one node with role = \"primary\"; found %d", p.replication, len(primaries))
		}
		p.sources = primaries
		if p.replication == Semisync {
			direct := 0
			for _, n := range s.Nodes {
				if n.From != "" && slices.Contains(primaries, n.From) {
					direct++
				}
			}
			if direct == 0 && len(primaries) == 1 {
				errs.Add("scheme.replication", "semi-synchronous replication needs at least one replica replicating directly from the primary")
			}
		}
	case Galera:
		roleErr(primaries, "primary", `every Galera node is a master: use role = "master"`)
		roleErr(replicas, "replica", `every Galera node is a master (asynchronous replicas of a Galera node are not supported yet)`)
		if len(masters) < 3 {
			errs.Add("scheme.replication", "Galera needs at least three nodes with role = \"master\": with two, either one cut off leaves no majority and both refuse writes")
		}
		p.sources = masters
	case Multimaster:
		roleErr(primaries, "primary", `every writer is a master: use role = "master"`)
		if len(masters) < 2 {
			errs.Add("scheme.replication", "multi-master needs at least two nodes with role = \"master\"")
		}
		p.sources = masters
	}
	// Replicas must reach a source through their chain of upstreams.
	for _, n := range s.Nodes {
		seen := map[string]bool{}
		for cur := s.Node(n.Name); cur != nil && cur.From != ""; cur = s.Node(cur.From) {
			if seen[cur.Name] {
				errs.Add("node."+n.Name+".from", "node %s's upstreams form a loop", n.Name)
				break
			}
			seen[cur.Name] = true
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

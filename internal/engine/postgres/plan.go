package postgres

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/internal/pipeline"
	"replab/internal/spec"
)

// Scheme names (docs/postgres.md maps them to PostgreSQL settings).
const (
	Async       = "async"       // physical streaming, asynchronous
	Sync        = "sync"        // physical streaming, synchronous (FIRST k / ANY k)
	Logical     = "logical"     // logical replication, optionally partial
	Snapshot    = "snapshot"    // logical replicas refreshed at an interval
	Pipeline    = "pipeline"    // extract, trail, pump, collector, replicat (pipeline.go)
	Multimaster = "multimaster" // pglogical, every master to every other
)

var schemes = []string{Async, Sync, Logical, Snapshot, Multimaster, Pipeline}

// Commit levels (synchronous_commit).
var (
	syncCommits  = []string{"remote_write", "on", "remote_apply", "local", "off"}
	asyncCommits = []string{"on", "local", "off"}
	durabilities = []string{"sync", "write-nosync", "nosync"}
	conflicts    = []string{"last_update_wins", "first_update_wins", "apply_remote", "keep_local", "error"}
)

// DefaultRefresh is how often snapshot replicas catch up when the spec
// does not say.
const DefaultRefresh = 60 * time.Second

// plan is a spec resolved for PostgreSQL: every default filled in.
type plan struct {
	replication string
	primaries   []string // the primary (physical/logical) or every master
	commit      string   // synchronous_commit
	syncNames   string   // synchronous_standby_names ("" unless sync)
	conflict    string   // pglogical.conflict_resolution
	refresh     time.Duration
	fsync       bool
	fullPage    bool
	walCompress bool
	pipeline    *pipelinePlan // replication = "pipeline"
	// manager runs the cluster (managerplan.go); nil: none, replab's own
	// promote faults fail over.
	manager *managerPlan
	// route is how clients find the node that takes writes (Route*).
	route string
}

// scheme is the [scheme] options as written.
type scheme struct {
	standbys, commit, durability, conflict string
	refresh                                time.Duration
	fsync, fullPage, walCompr              *bool
}

var standbysRE = regexp.MustCompile(`(?i)^\s*(?:(FIRST|ANY)\s+(\d+)\s*)?\(?\s*([^()]*?)\s*\)?\s*$`)

// makePlan validates s for PostgreSQL and resolves its defaults. Every
// [scheme] key but replication is PostgreSQL's own: standbys, commit,
// durability, refresh, conflict, fsync, full_page_writes, wal_compression.
func makePlan(s *spec.Spec) (*plan, error) {
	errs := s.NewErrors()
	o := s.SchemeOptions("engine postgres")
	p := &plan{replication: s.Scheme.Replication, fsync: true, fullPage: true}
	if p.replication == "" {
		p.replication = Async
	}
	if !slices.Contains(schemes, p.replication) {
		errs.Add("scheme.replication", "PostgreSQL has no scheme %q%s; schemes: %s", p.replication, spec.DidYouMean(p.replication, schemes), strings.Join(schemes, ", "))
		return nil, errs.Err()
	}
	sc := scheme{
		standbys:   o.String("standbys", ""),
		commit:     o.String("commit", ""),
		durability: o.String("durability", "", durabilities...),
		conflict:   o.String("conflict", ""),
		refresh:    o.Duration("refresh", 0, time.Second, 24*time.Hour),
		fsync:      o.Bool("fsync"),
		fullPage:   o.Bool("full_page_writes"),
		walCompr:   o.Bool("wal_compression"),
	}
	if p.replication == Pipeline {
		p.pipeline = readPipelinePlan(o)
	}
	readManager(s, o, errs, p)
	errs.Join(o.Err())
	var standbys, replicas, masters []string
	for _, n := range s.Nodes {
		field := "node." + n.Name
		switch n.Role {
		case "primary":
			p.primaries = append(p.primaries, n.Name)
		case "standby":
			standbys = append(standbys, n.Name)
		case "replica":
			replicas = append(replicas, n.Name)
		case "master":
			masters = append(masters, n.Name)
		}
		if n.ApplyDelay > 0 && n.Role != "standby" {
			errs.Add(field+".apply_delay", "apply_delay holds back replay on a physical standby; node %s is a %s", n.Name, n.Role)
		}
		if len(n.Tables) > 0 && p.replication == Pipeline {
			errs.Add(field+".table", "table filters are for replication = \"logical\" or \"snapshot\"; the pipeline carries every table")
		} else if len(n.Tables) > 0 && n.Role != "replica" {
			errs.Add(field+".table", "table filters make a logical replica partial; node %s is a %s (use role = \"replica\" with replication = \"logical\" or \"snapshot\")", n.Name, n.Role)
		}
		if n.From != "" {
			up := s.Node(n.From)
			if up == nil {
				continue // the spec already reported it
			}
			switch {
			case n.Role == "standby" && up.Role != "primary" && up.Role != "standby":
				errs.Add(field+".from", "a standby replicates from the primary or another standby (cascading); %s is a %s", up.Name, up.Role)
			case n.Role == "replica" && up.Role != "primary":
				errs.Add(field+".from", "PostgreSQL %s logical replicas subscribe to the primary; %s is a %s", "15", up.Name, up.Role)
			}
		}
	}
	roleErr := func(names []string, role, hint string) {
		for _, n := range names {
			errs.Add("node."+n+".role", "replication = %q has no %s nodes; %s", p.replication, role, hint)
		}
	}
	switch p.replication {
	case Async, Sync:
		roleErr(replicas, "replica", `use role = "standby", or replication = "logical" for replicas`)
		roleErr(masters, "master", `use replication = "multimaster" for masters`)
		if p.replication == Sync && len(standbys) == 0 {
			errs.Add("scheme.replication", "synchronous replication needs at least one standby")
		}
	case Logical, Snapshot, Pipeline:
		roleErr(standbys, "standby", `use role = "replica" (logical), or replication = "async"/"sync" for physical standbys`)
		roleErr(masters, "master", `use replication = "multimaster" for masters`)
		checkFilters(s, errs)
	case Multimaster:
		roleErr(standbys, "standby", `every node is a master`)
		roleErr(replicas, "replica", `every node is a master`)
		roleErr(p.primaries, "primary", `every node is a master: use role = "master"`)
		if len(masters) < 2 {
			errs.Add("scheme.replication", "multi-master needs at least two nodes with role = \"master\"")
		}
		p.primaries = masters
	}
	if p.replication != Multimaster && len(p.primaries) != 1 {
		errs.Add("node", "replication = %q needs exactly one node with role = \"primary\"; found %d", p.replication, len(p.primaries))
	}
	checkManagedNodes(s, errs, p, sc)

	// Commit level and durability.
	allowed := asyncCommits
	if p.replication == Sync {
		allowed = syncCommits
	}
	p.commit = sc.commit
	switch sc.durability {
	case "", "sync":
	case "write-nosync":
		// WAL is written at commit but never flushed: Berkeley DB's WRITE_NOSYNC.
		p.fsync = false
	case "nosync":
		// Commit returns before its WAL is written: Berkeley DB's NOSYNC.
		if p.commit != "" && p.commit != "off" {
			errs.Add("scheme.commit", "durability = \"nosync\" means synchronous_commit = off; it cannot wait for commit = %q", p.commit)
		}
		if p.replication == Sync {
			// Runs, and a study's sweep means it (JE's NO_SYNC without
			// acks): said, not refused.
			errs.Warn("scheme.durability", `with replication = "sync" no commit waits for a standby: "nosync" is synchronous_commit = off, which turns the wait off too; for commits that wait for a standby without flushing their WAL, use durability = "write-nosync"`)
		}
		p.commit = "off"
	}
	if p.commit == "" {
		p.commit = "on"
	}
	if !slices.Contains(allowed, p.commit) {
		if p.replication != Sync && slices.Contains(syncCommits, p.commit) {
			errs.Add("scheme.commit", "commit = %q waits for synchronous standbys; use replication = \"sync\", or one of %s", p.commit, strings.Join(allowed, ", "))
		} else {
			errs.Add("scheme.commit", "unknown commit level %q; with replication = %q choose one of %s", p.commit, p.replication, strings.Join(allowed, ", "))
		}
	}
	if sc.fsync != nil {
		p.fsync = *sc.fsync
	}
	p.fullPage = sc.fullPage == nil || *sc.fullPage
	p.walCompress = sc.walCompr != nil && *sc.walCompr

	// Synchronous standbys.
	if sc.standbys != "" && p.replication != Sync && p.manager == nil {
		errs.Add("scheme.standbys", "standbys names synchronous standbys; it needs replication = \"sync\"")
	}
	if p.replication == Sync && p.manager == nil {
		var direct []string
		for _, n := range s.Nodes {
			if n.Role == "standby" && slices.Contains(p.primaries, n.From) {
				direct = append(direct, n.Name)
			}
		}
		names, err := syncStandbyNames(sc.standbys, direct)
		if err != "" {
			errs.Add("scheme.standbys", "%s", err)
		}
		p.syncNames = names
	}

	// Refresh and conflicts.
	p.refresh = sc.refresh
	if p.refresh != 0 && p.replication != Snapshot {
		errs.Add("scheme.refresh", "refresh sets how often snapshot replicas catch up; it needs replication = \"snapshot\"")
	}
	if p.replication == Snapshot && p.refresh == 0 {
		p.refresh = DefaultRefresh
	}
	p.conflict = sc.conflict
	if p.conflict != "" && p.replication != Multimaster {
		errs.Add("scheme.conflict", "conflict resolution applies to replication = \"multimaster\"")
	}
	if p.replication == Multimaster {
		if p.conflict == "" {
			p.conflict = "last_update_wins"
		}
		if !slices.Contains(conflicts, p.conflict) {
			errs.Add("scheme.conflict", "unknown conflict resolution %q; pglogical offers %s", p.conflict, strings.Join(conflicts, ", "))
		}
	}
	if p.pipeline != nil && p.pipeline.sink == sinkMariaDB && s.Workload != nil {
		// The workload's SQL is PostgreSQL's: reads sent to a replica
		// would reach MariaDB.
		if v, _ := s.Workload.Options["reads_at"].(string); strings.TrimSpace(v) == "replica" {
			errs.Add("workload.reads_at", "the replicas are MariaDB servers (scheme target = \"mariadb\") and the workload speaks PostgreSQL's SQL: read at the source (reads_at = \"source\"), or replicate to PostgreSQL")
		}
	}
	for i, f := range s.Faults {
		if f.Stage == "" {
			continue
		}
		field := fmt.Sprintf("fault[%d].stage", i+1)
		if p.manager != nil {
			if st := p.managerStages(); !slices.Contains(st, f.Stage) {
				errs.Add(field, "a node under manager %s has the stages %s, not %q%s", p.manager.kind, strings.Join(st, " and "), f.Stage, spec.DidYouMean(f.Stage, st))
			}
			continue
		}
		if p.replication != Pipeline {
			errs.Add(field, "stage faults act on the pipeline's stages; replication = %q has none (use replication = \"pipeline\", or leave stage out to act on the server)", p.replication)
			continue
		}
		if st := p.stages(f.Node); !slices.Contains(st, f.Stage) {
			errs.Add(field, "node %s has no stage %q%s; its stages: %s", f.Node, f.Stage, spec.DidYouMean(f.Stage, st), strings.Join(st, ", "))
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// stages are the pipeline stages that serve node: the primary's extract;
// a replica's pump, collector and replicats (the "remote" configuration
// has no pump or collector, and its replicats run in the primary's site
// but still serve the replica).
func (p *plan) stages(node string) []string {
	if p.pipeline == nil {
		return nil
	}
	if slices.Contains(p.primaries, node) {
		return []string{pipeline.KindExtract}
	}
	if !p.pipeline.pump {
		return []string{pipeline.KindReplicat}
	}
	return []string{pipeline.KindPump, pipeline.KindCollector, pipeline.KindReplicat}
}

// syncStandbyNames checks and normalises a synchronous_standby_names
// value: "FIRST k (a, b)", "ANY k (a, b)" or a plain list; names must be
// standbys streaming directly from the primary. Empty means ANY 1 of all
// of them.
func syncStandbyNames(v string, direct []string) (string, string) {
	if len(direct) == 0 {
		return "", "no standby streams directly from the primary, so none can be synchronous"
	}
	if strings.TrimSpace(v) == "" {
		return fmt.Sprintf("ANY 1 (%s)", strings.Join(direct, ", ")), ""
	}
	m := standbysRE.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Sprintf("%q is not a standby list; write \"FIRST k (a, b)\", \"ANY k (a, b)\" or \"a, b\"", v)
	}
	method := strings.ToUpper(m[1])
	k := 1
	if m[2] != "" {
		k, _ = strconv.Atoi(m[2])
	}
	var names []string
	for _, n := range strings.Split(m[3], ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(direct, n) {
			return "", fmt.Sprintf("%q is not a standby streaming directly from the primary (those are: %s); cascaded standbys cannot be synchronous", n, strings.Join(direct, ", "))
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return "", "no standby names given"
	}
	if k < 1 || k > len(names) {
		return "", fmt.Sprintf("%d synchronous standbys asked for, but %d named: commits would never return", k, len(names))
	}
	if method == "" {
		method = "FIRST"
	}
	return fmt.Sprintf("%s %d (%s)", method, k, strings.Join(names, ", ")), ""
}

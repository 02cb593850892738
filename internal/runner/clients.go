package runner

import (
	"errors"
	"fmt"
	"strings"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/workload"
)

// [[client]] groups (issue 32: users in several regions): each group's
// users run in its site, write at its nearest source (or user i's of
// them), read where it says, and are measured on their own as well as in
// the run's totals (summary.json clients).

// atSourceIn is the place of a group's writes at its nearest source:
// the source in the site that follows, else user i's of the sources.
const atSourceIn = "source@"

// userSite is the site user u runs in: its group's, else [run] client.
func (r *run) userSite(u int) string {
	if cl := r.s.ClientOf(u); cl != nil {
		return cl.Site
	}
	return r.client
}

// writeSource is user u's source for writes "nearest" to site: the
// source there, else the sources in turn (user u's, then the next on each
// try).
func (r *run) writeSource(u, tries int, site string) (engine.Node, error) {
	srcs := engine.Sources(r.cluster.Nodes())
	if len(srcs) == 0 {
		return engine.Node{}, errors.New("no node takes writes now")
	}
	if tries == 0 {
		for _, n := range srcs {
			if n.Site == site {
				return n, nil
			}
		}
	}
	return srcs[(u+tries)%len(srcs)], nil
}

// writerSource is the source user u writes at when the run starts: for
// the lag probe, which skips a master's own writers there.
func (r *run) writerSource(u int) string {
	if cl := r.s.ClientOf(u); cl != nil && cl.Writes == spec.ClientNearest {
		if n, err := r.writeSource(u, 0, cl.Site); err == nil {
			return n.Name
		}
	}
	if len(r.sources) == 0 {
		return ""
	}
	return r.sources[u%len(r.sources)].Name
}

// clientConfig gives the driver the groups: each user's group, the types
// it runs and where.
func (r *run) clientConfig(cfg *driver.Config) {
	if len(r.s.Clients) == 0 {
		return
	}
	cfg.Group = func(u int) string { return r.s.ClientOf(u).Name }
	cfg.Runs = func(u int, t *workload.TxType) bool {
		cl := r.s.ClientOf(u)
		if t.ReadOnly {
			return cl.Reads != spec.ClientNone
		}
		return cl.Writes != spec.ClientNone
	}
	cfg.Place = func(u int, t *workload.TxType) string {
		cl := r.s.ClientOf(u)
		if !t.ReadOnly {
			if cl.Writes == spec.ClientNearest && t.At == workload.AtSource {
				return atSourceIn + cl.Site
			}
			return t.At
		}
		switch cl.Reads {
		case spec.ClientSource:
			return workload.AtSource
		case spec.ClientReplica:
			return workload.AtReplica
		case spec.ClientNearest:
			if r.hasNode(cl.Site) {
				return workload.AtSite(cl.Site)
			}
		}
		return t.At
	}
}

// describeClients is the line the run prints about who runs where.
func (r *run) describeClients() string {
	if len(r.s.Clients) == 0 {
		return "from site " + r.client
	}
	var parts []string
	for _, cl := range r.s.Clients {
		parts = append(parts, fmt.Sprintf("%s: %d in %s (writes %s, reads %s)", cl.Name, cl.Users, cl.Site, cl.Writes, cl.Reads))
	}
	return "in groups " + strings.Join(parts, "; ")
}

// fillClients puts each group's figures into the summary.
func (r *run) fillClients() {
	if r.res == nil || len(r.res.Groups) == 0 {
		return
	}
	r.sum.Clients = map[string]*report.ClientSummary{}
	for _, cl := range r.s.Clients {
		g := r.res.Groups[cl.Name]
		if g == nil {
			continue
		}
		r.sum.Clients[cl.Name] = &report.ClientSummary{Site: cl.Site, Writes: cl.Writes, Reads: cl.Reads, Users: g.Users,
			Transactions: g.Transactions, TPS: g.TPS, Errors: g.Errors, CommitLatency: g.CommitLatency, Types: g.Types}
	}
}

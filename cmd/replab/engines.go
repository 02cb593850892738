package main

import (
	"context"
	"fmt"
	"io"

	"replab/internal/engine"
	"replab/internal/engine/bdbje"
	"replab/internal/engine/mariadb"
	"replab/internal/engine/postgres"
	"replab/internal/engine/xrootd"
	"replab/internal/lab"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/target"
)

// engines is every database engine this binary can run, one line each.
// An engine that runs another's servers (PostgreSQL's pipeline scheme,
// MariaDB sinks) and target mode find the engines they need in the same
// registry.
func engines() *engine.Registry {
	r := engine.NewRegistry()
	r.MustRegister(
		postgres.Engine{Engines: r.Get},
		mariadb.Engine{},
		xrootd.Engine{},
		bdbje.Engine{},
		target.Engine{Engines: r.Get},
	)
	return r
}

// loadChecked loads a spec and validates it as replab run would: its
// engine and workload parts and every sweep point, every error at once.
func loadChecked(path string) (*spec.Spec, engine.Engine, error) {
	s, err := spec.LoadForCheck(path)
	if s == nil {
		return nil, nil, err
	}
	// A spec read with errors is still checked: its engine's and its
	// workload's errors come out with them.
	if err := runner.Validate(s, engines(), workloads(), false); err != nil {
		return nil, nil, err
	}
	e, err := engines().For(s)
	return s, e, err
}

// startCluster brings up the spec's servers in a running lab and records
// them in the lab's status; nil when the spec has no engine.
func startCluster(ctx context.Context, e engine.Engine, l *lab.Lab, out io.Writer) (engine.Cluster, error) {
	if e == nil {
		return nil, nil
	}
	fmt.Fprintf(out, "engine %s: starting %d nodes\n", e.Kind(), len(l.Spec.Nodes))
	c, err := e.Up(ctx, l, out)
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", e.Kind(), err)
	}
	var ns []lab.NodeStatus
	for _, n := range c.Nodes() {
		ns = append(ns, lab.NodeStatus{Name: n.Name, Site: n.Site, Role: n.Role, From: n.From, DSN: n.DSN, Version: n.Version})
	}
	l.SetNodes(ns)
	l.SetNodeControl(runner.NodesOf(e.Kind(), c))
	return c, nil
}

func printNodes(out io.Writer, st lab.Status) {
	for _, n := range st.Nodes {
		from := ""
		if n.From != "" {
			from = " from " + n.From
		}
		fmt.Fprintf(out, "node %-10s %-8s site %-10s %s%s\n", n.Name, n.Role, n.Site, n.DSN, from)
	}
}

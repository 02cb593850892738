package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// pgLab is a lab with an engine running in it: PostgreSQL for every step
// but the MariaDB lag step.
type pgLab struct {
	lab     *lab.Lab
	cluster engine.Cluster
}

// upPostgres starts a lab from spec text (everything after the [lab]
// table, engine and nodes included) and brings PostgreSQL up in it. The
// caller must close it.
func upPostgres(ctx context.Context, name, body string) (*pgLab, error) {
	return upLab(ctx, postgres.Engine{}, name, body)
}

// upLab is upPostgres for any engine.
func upLab(ctx context.Context, e engine.Engine, name, body string) (*pgLab, error) {
	text := fmt.Sprintf("[lab]\nname = %q\n%s", name, body)
	s, err := spec.Parse(name+".toml", []byte(text))
	if err != nil {
		return nil, fmt.Errorf("spec of lab %s: %w", name, err)
	}
	if err := e.Validate(s); err != nil {
		return nil, fmt.Errorf("spec of lab %s: %w", name, err)
	}
	l, err := benchkit.StartLab(ctx, s, logf)
	if err != nil {
		return nil, fmt.Errorf("start lab %s: %w", name, err)
	}
	uctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := e.Up(uctx, l, &prefixWriter{w: os.Stderr, prefix: "      "})
	if err != nil {
		closeLab(l)
		return nil, fmt.Errorf("start %s in lab %s: %w", e.Kind(), name, err)
	}
	return &pgLab{lab: l, cluster: c}, nil
}

// close stops the servers, then removes the lab; failures are reported
// on stderr (the figures stand).
func (p *pgLab) close() {
	if err := p.cluster.Close(); err != nil {
		logf("      warning: stop the servers in lab %s: %v", p.lab.Spec.Lab.Name, err)
	}
	closeLab(p.lab)
}

func closeLab(l *lab.Lab) {
	if err := l.Close(); err != nil {
		logf("      warning: close lab %s: %v", l.Spec.Lab.Name, err)
	}
}

// node returns the named node.
func (p *pgLab) node(name string) (engine.Node, error) {
	for _, n := range p.cluster.Nodes() {
		if n.Name == name {
			return n, nil
		}
	}
	return engine.Node{}, fmt.Errorf("no node %s", name)
}

// exec runs statements one by one on node, connecting from its own site.
func (p *pgLab) exec(ctx context.Context, node string, stmts ...string) error {
	n, err := p.node(node)
	if err != nil {
		return err
	}
	db, err := p.sql().Open(ctx, node, n.Site)
	if err != nil {
		return err
	}
	defer db.Close()
	return execDB(ctx, db, stmts...)
}

func execDB(ctx context.Context, db *sql.DB, stmts ...string) error {
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// prefixWriter indents every line written to w (the engine's progress).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// sql is the cluster's SQL access (PostgreSQL has it).
func (p *pgLab) sql() engine.SQL { return p.cluster.(engine.SQL) }

// driverConfig completes cfg as replab run does for this cluster: its
// error classes and its pipelining.
func (p *pgLab) driverConfig(cfg driver.Config) driver.Config {
	cfg.Classify = func(err error) engine.ErrorClass { return engine.Classify(p.cluster, err) }
	cfg.Pipeliner, _ = p.cluster.(engine.Pipeliner)
	return cfg
}

// lagReader reads replab_lag at node as replab run does.
func (p *pgLab) lagReader(ctx context.Context, node string) (engine.LagReader, error) {
	stamps, _, err := enginekit.StampsOf(p.cluster)
	if err != nil {
		return nil, err
	}
	return stamps.LagReader(ctx, node)
}

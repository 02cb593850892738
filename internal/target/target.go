// Package target is target mode: the same workload, lag probe and report
// as a lab run, against servers that already exist ([target] in a spec).
// It builds nothing and needs no root. It checks the topology it was told
// against what the servers report, creates replab's tables only where it
// was allowed to (in a schema of their own, dropped at the end), and reads
// lag from the driver's host — corrected by the one-way time and bounded —
// or through a replab agent beside each replica.
package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is target mode as an engine.Engine, registered under
// engine.TargetKind: the runner checks a target spec's workload in the
// target's dialect like any other, and connects through it
// (engine.Connector). Up is not how a target starts.
type Engine struct {
	kind string // the target's engine, "postgres" or "mariadb"; "" as registered
}

// ForSpec implements engine.SpecEngine.
func (e Engine) ForSpec(s *spec.Spec) engine.Engine {
	if s.Target == nil {
		return e
	}
	return Engine{kind: s.Target.Engine}
}

// Kind implements engine.Engine.
func (e Engine) Kind() string {
	if e.kind == "" {
		return engine.TargetKind
	}
	return engine.TargetKind + " " + e.kind
}

// Connect implements engine.Connector.
func (e Engine) Connect(ctx context.Context, s *spec.Spec, log io.Writer) (engine.Cluster, error) {
	return Connect(ctx, s, log)
}

// Dialect implements engine.Dialecter.
func (e Engine) Dialect() engine.Dialect {
	if e.kind == "mariadb" {
		return engine.MySQL
	}
	return engine.Postgres
}

// Up implements engine.Engine; a target is connected to, not built.
func (e Engine) Up(context.Context, *lab.Lab, io.Writer) (engine.Cluster, error) {
	return nil, errors.New("a target is not built in a lab: use target.Connect")
}

// Validate implements engine.Engine: what can be checked without the
// servers — connection strings that parse and carry no password, a
// supported engine.
func (e Engine) Validate(s *spec.Spec) error {
	errs := s.NewErrors()
	t := s.Target
	if t == nil {
		errs.Add("engine.kind", `"target" is not an engine to build: to measure servers that exist, write a [target] table instead of [engine] and [node.NAME] (docs/target.md)`)
		return errs.Err()
	}
	for _, n := range t.Nodes {
		if n.Role == "master" && t.Engine != "mariadb" {
			errs.Add("target.node."+n.Name+".role", `masters are read from a MariaDB Galera cluster (engine = "mariadb"); PostgreSQL multi-master targets (pglogical) are not supported yet`)
		}
		field := "target.node." + n.Name + ".dsn"
		if t.Engine == "mariadb" {
			cfg, err := parseMySQLDSN(n.DSN)
			switch {
			case err != nil:
				errs.Add(field, "%v", err)
			case cfg.Passwd != "":
				errs.Add(field, "the connection string carries a password, and the spec is kept with the results: remove it and give the password with [target] password_file")
			}
			continue
		}
		if hasPassword(n.DSN) {
			errs.Add(field, "the connection string carries a password, and the spec is kept with the results: remove it and give the password in the environment (PGPASSWORD, ~/.pgpass) or with [target] password_file")
			continue
		}
		if _, err := parseDSN(n.DSN); err != nil {
			errs.Add(field, "%v", err)
		}
	}
	return errs.Err()
}

var kvPasswordRE = regexp.MustCompile(`(^|\s)password\s*=`)

// hasPassword says whether a libpq connection string (key=value or URL)
// carries a password.
func hasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return strings.Contains(dsn, "password")
		}
		if _, set := u.User.Password(); set {
			return true
		}
		return u.Query().Has("password")
	}
	return kvPasswordRE.MatchString(dsn)
}

// readSecret reads a one-line secret file (a password, a token): its
// first line, without the newline.
func readSecret(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%s: %s is empty", what, path)
	}
	return line, nil
}

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
	"os"
	"strings"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is target mode as an engine.Engine, registered under
// engine.TargetKind: the runner checks a target spec's workload in the
// target's dialect like any other, and connects through it
// (engine.TargetMode). Up is not how a target starts. What differs
// between engines is their engine.Attacher, found by [target] engine in
// the registry.
type Engine struct {
	// Engines finds the engine of [target] engine = "…" (the registry's
	// Get).
	Engines engine.Finder

	kind string          // the target's engine, "postgres" or "mariadb"; "" as registered
	eng  engine.Engine   // that engine; nil as registered, or when none is registered
	att  engine.Attacher // its side of target mode; nil when it has none
}

// ForSpec implements engine.SpecEngine.
func (e Engine) ForSpec(s *spec.Spec) engine.Engine {
	if s.Target == nil {
		return e
	}
	out := Engine{Engines: e.Engines, kind: s.Target.Engine}
	if e.Engines != nil {
		out.eng, _ = e.Engines(s.Target.Engine)
		out.att, _ = out.eng.(engine.Attacher)
	}
	return out
}

// Kind implements engine.Engine.
func (e Engine) Kind() string {
	if e.kind == "" {
		return engine.TargetKind
	}
	return engine.TargetKind + " " + e.kind
}

// Dialect implements engine.Dialecter: the target's engine's.
func (e Engine) Dialect() engine.Dialect {
	if e.eng == nil {
		return ""
	}
	return engine.DialectOf(e.eng)
}

// Up implements engine.Engine; a target is connected to, not built.
func (e Engine) Up(context.Context, *lab.Lab, io.Writer) (engine.Cluster, error) {
	return nil, errors.New("a target is not built in a lab: connect to it (Engine.Connect)")
}

// Validate implements engine.Engine: what can be checked without the
// servers — connection strings that parse and carry no password, roles
// the engine can read — is the target's engine's to say.
func (e Engine) Validate(s *spec.Spec) error {
	errs := s.NewErrors()
	t := s.Target
	if t == nil {
		errs.Add("engine.kind", `"target" is not an engine to build: to measure servers that exist, write a [target] table instead of [engine] and [node.NAME] (docs/target.md)`)
		return errs.Err()
	}
	if e.att == nil {
		errs.Add("target.engine", "this replab cannot measure existing %s servers", t.Engine)
		return errs.Err()
	}
	return e.att.ValidateTarget(s)
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

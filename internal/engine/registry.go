package engine

import (
	"fmt"
	"sort"
	"strings"

	"replab/internal/spec"
)

// Registry holds the engines a replab binary knows, by kind.
type Registry struct {
	byKind map[string]Engine
}

// NewRegistry collects engines. Two engines of one kind are a programming
// error: it panics, naming them.
func NewRegistry(engines ...Engine) *Registry {
	r := &Registry{byKind: map[string]Engine{}}
	r.MustRegister(engines...)
	return r
}

// MustRegister adds engines, and panics on a kind that is taken: for
// engines made with the registry's Get (a Finder) in hand.
func (r *Registry) MustRegister(engines ...Engine) {
	for _, e := range engines {
		if err := r.Register(e); err != nil {
			panic(err)
		}
	}
}

// Finder finds a registered engine by kind, as Registry.Get does: what an
// engine that needs another (PostgreSQL's pipeline scheme runs MariaDB
// servers) or target mode is handed at construction, so that no engine
// package imports another.
type Finder func(kind string) (Engine, bool)

// Register adds an engine; it refuses a kind that is taken.
func (r *Registry) Register(e Engine) error {
	if old, dup := r.byKind[e.Kind()]; dup {
		return fmt.Errorf("engine kind %q registered twice (%T and %T)", e.Kind(), old, e)
	}
	r.byKind[e.Kind()] = e
	return nil
}

// Kinds lists the registered engine kinds, sorted.
func (r *Registry) Kinds() []string {
	var k []string
	for n := range r.byKind {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// For returns the engine a spec asks for, after validating the spec with
// it; nil when the spec has no engine. A spec with [target] gets the
// registered TargetKind engine, made for that spec (SpecEngine).
func (r *Registry) For(s *spec.Spec) (Engine, error) {
	if s.Target != nil {
		e, ok := r.byKind[TargetKind]
		if !ok {
			return nil, s.Errorf("target", "this replab has no target mode")
		}
		if se, ok := e.(SpecEngine); ok {
			e = se.ForSpec(s)
		}
		return e, e.Validate(s)
	}
	if s.Engine == nil {
		return nil, nil
	}
	e, ok := r.byKind[s.Engine.Kind]
	if !ok {
		return nil, s.Errorf("engine.kind", "unknown engine %q; engines: %s", s.Engine.Kind, strings.Join(r.Kinds(), ", "))
	}
	if err := e.Validate(s); err != nil {
		return nil, err
	}
	return e, nil
}

// Get returns the engine of a kind.
func (r *Registry) Get(kind string) (Engine, bool) {
	e, ok := r.byKind[kind]
	return e, ok
}

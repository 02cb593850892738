// Package faultkind holds the kinds of fault — a link's changes, a node's
// kill or pause, a site's isolation, a flapping link — each in a file of
// its own that says how it reads its keys, checks them, applies, heals and
// describes itself, and registers itself once. The spec's [[fault]]
// tables, the fault schedule, the lab's control socket and `replab fault`
// all find kinds here. A kind acts on the world only through World.
package faultkind

import (
	"context"
	"time"

	"replab/internal/linkem"
)

// What a fault acts on: the key of a [[fault]] (and the first word of
// replab fault) that names its subject.
const (
	OnLink = "link" // link = "A<->B" (both directions) or "A->B" (one)
	OnNode = "node" // node = "NAME", with stage = "…" one of its replication stages
	OnSite = "site" // site = "NAME": the site and every link it has
)

// Kind is one kind of fault, registered once by name (Register).
type Kind struct {
	// Name is what do says ("kill", "isolate", "flap"); SetName for a
	// link's changes, which a [[fault]] gives with set and no do.
	Name string
	// On is what it acts on: OnLink, OnNode or OnSite.
	On string
	// About says what it does in a few words, for replab fault --help.
	About string
	// Keys are its own keys in a [[fault]] (and flags of replab fault,
	// except set, which is the command's words), besides at, for, do and
	// the subject's.
	Keys []Key
	// Instant, for a fault done at an instant (a restart), is what to use
	// instead when a for is given; "" for one that lasts until healed. An
	// instantaneous fault takes no for and has nothing to heal.
	Instant string
	// Heal names what heals it, as replab fault says it after --for:
	// "start", "resume", "parameters before it put back".
	Heal string
	// Stages: a node fault that can act on one of a node's replication
	// stages instead of its server.
	Stages bool
	// Parse reads the kind's keys through r and checks the fault against
	// the spec s, reporting every problem through r; it returns nil when
	// it reported one. s is nil for a fault given on a command line, where
	// only the form can be checked (the lab refuses what it does not have
	// when the fault is applied).
	Parse func(r Reader, sub Subject, s Spec) Fault
}

// Key is one of a kind's keys.
type Key struct {
	Name  string
	About string // for replab fault --help: `how often the link goes down, e.g. "2s"`
}

// Subject is what a fault acts on, as the spec or the command line named
// it and the spec (or the lab) checked it.
type Subject struct {
	On    string `json:"on"`             // OnLink, OnNode or OnSite
	From  string `json:"from,omitempty"` // a link: from -> to, and to -> from when Both
	To    string `json:"to,omitempty"`
	Both  bool   `json:"both,omitempty"`
	Node  string `json:"node,omitempty"`
	Stage string `json:"stage,omitempty"` // a node's replication stage, or ""
	Site  string `json:"site,omitempty"`
}

// Directions are a link subject's directions: from->to, then to->from
// when it names both.
func (s Subject) Directions() [][2]string {
	d := [][2]string{{s.From, s.To}}
	if s.Both {
		d = append(d, [2]string{s.To, s.From})
	}
	return d
}

// Link is a link subject as the logs write it: "a<->b" or "a->b".
func (s Subject) Link() string {
	if s.Both {
		return s.From + "<->" + s.To
	}
	return s.From + "->" + s.To
}

// Fault is one fault as its kind read it, ready to apply.
type Fault interface {
	// Describe is the fault in a few words, as faults.csv, the lab's
	// fault log and the report say it: "node e1 kill", "link a<->b set
	// down", "site eu isolate".
	Describe() string
	// Parts are what it holds while in effect: two faults that hold a
	// part at the same time are refused.
	Parts() []Part
	// Apply does it to w; the heal it returns undoes it (nil: nothing to
	// undo, an instantaneous fault). An Apply that fails leaves w as it
	// found it where it can.
	Apply(ctx context.Context, w World) (Heal, error)
}

// Heal undoes an applied fault.
type Heal func(ctx context.Context) error

// Stepper is a Fault that acts again while in effect (a flapping link):
// Step(i) is due Steps()[i] after the fault was applied, in order, while it
// has not been healed. A failed step does not end the fault; its heal
// still puts everything back.
type Stepper interface {
	Fault
	Steps() []time.Duration
	Step(ctx context.Context, w World, i int) error
}

// Part is one thing a fault holds: a link direction, or a node (Stage:
// one of its stages).
type Part struct {
	Dir   [2]string
	Node  string
	Stage string
}

// String names the part in an error: "eu->primary", "node e1", "the
// replicat of node e1".
func (p Part) String() string {
	switch {
	case p.Node != "" && p.Stage != "":
		return "the " + p.Stage + " of node " + p.Node
	case p.Node != "":
		return "node " + p.Node
	}
	return p.Dir[0] + "->" + p.Dir[1]
}

// Class is what kind of thing the part is, in an error: "node" or "link
// direction".
func (p Part) Class() string {
	if p.Node != "" {
		return "node"
	}
	return "link direction"
}

// Reader is a fault as written, for a kind's Parse: a [[fault]] table
// (problems become the spec's file:line errors) or a command line.
type Reader interface {
	// Has says whether the fault gives key.
	Has(key string) bool
	// Value is key's value as written: a string, an int64, a float64, a
	// bool or a list ([]any); nil when absent.
	Value(key string) any
	// String reads key as a string; a value of another type is reported
	// as wanting want. false when absent or reported.
	String(key, want string) (string, bool)
	// Duration reads key as a duration with a unit ("2s", "500ms"),
	// reporting a bad one; false when absent or reported.
	Duration(key, want string) (time.Duration, bool)
	// For is the fault's for when it is given and is a duration above 0
	// (whoever reads for reports a bad one).
	For() (time.Duration, bool)
	// Fail reports a problem with key's value; FailAt one with key itself,
	// or with the fault as a whole when key is "".
	Fail(key, format string, args ...any)
	FailAt(key, format string, args ...any)
}

// Spec is what a kind may look up in the spec to check a fault (the lab
// offers the same from what it runs).
type Spec interface {
	// Links lists every [[link]]'s two sites, in the spec's order.
	Links() [][2]string
	// Direction is the parameters of the direction from->to; false when
	// no link joins the two sites.
	Direction(from, to string) (linkem.Params, bool)
	// Change applies one of replab link set's changes ("loss=5%",
	// "delay=400ms", "down") to p as link set would; on error p is
	// unchanged.
	Change(p *linkem.Params, change string) error
}

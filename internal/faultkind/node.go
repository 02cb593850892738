package faultkind

import (
	"context"
	"fmt"
)

// The node kinds: what an engine can do to a node's server, or (stage =
// "…") to the processes of one of its replication stages.
//
//	node = "e1"
//	do = "kill"             # kill, stop, restart, pause, start, resume, promote
//
// A node action is one line of nodeActions; a new one that the engines do
// through a capability of their own also needs a method on Nodes.
var nodeActions = []struct {
	name, about string
	heal        string // the action that undoes it; "" for an instantaneous one
	stages      bool   // a stage can have it done too
	do          func(Nodes, context.Context, string) error
}{
	{"kill", "SIGKILL to every process of the node: a crash", "start", true, Nodes.Kill},
	{"stop", "a clean shutdown", "start", true, Nodes.Stop},
	{"restart", "stop, then start", "", true, Nodes.Restart},
	{"pause", "SIGSTOP: the node hangs with its connections open", "resume", true, Nodes.Pause},
	{"start", "start a stopped or killed node", "", true, Nodes.Start},
	{"resume", "SIGCONT a paused node", "", true, Nodes.Resume},
	{"promote", "a standby becomes the primary: failover", "", false, Nodes.Promote},
}

// PrimaryNode, as a node fault's node, is whichever node takes writes when
// the fault is applied: under an HA manager the primary moves, and "kill
// the primary" three times kills three different nodes. Its heal acts on
// the node the fault acted on. As a site fault's site it is that node's
// site.
const PrimaryNode = "@primary"

// PrimaryFinder is a World that can say which node takes writes now, and
// in which site: the one node (or site) a PrimaryNode fault acts on.
type PrimaryFinder interface {
	Primary(ctx context.Context) (node, site string, err error)
}

// primarySite resolves site when it is PrimaryNode.
func primarySite(ctx context.Context, w World, site string) (string, error) {
	if site != PrimaryNode {
		return site, nil
	}
	pf, ok := w.(PrimaryFinder)
	if !ok {
		return "", fmt.Errorf("site %s: cannot tell which node takes writes here", PrimaryNode)
	}
	_, s, err := pf.Primary(ctx)
	if err != nil {
		return "", fmt.Errorf("site %s: %w", PrimaryNode, err)
	}
	return s, nil
}

// linkedTo are the sites joined to site by one of links.
func linkedTo(links [][2]string, site string) []string {
	var out []string
	for _, l := range links {
		switch site {
		case l[0]:
			out = append(out, l[1])
		case l[1]:
			out = append(out, l[0])
		}
	}
	return out
}

// useLasting is what to use instead of for on an instantaneous node fault.
const useLasting = `to take a node away for a while, use do = "stop", "kill" or "pause" with for`

func init() {
	for _, a := range nodeActions {
		k := Kind{Name: a.name, On: OnNode, About: a.about, Heal: a.heal, Stages: a.stages}
		if a.heal == "" {
			k.Instant = useLasting
		}
		k.Parse = func(r Reader, sub Subject, s Spec) Fault {
			if sub.Stage != "" && !a.stages {
				r.Fail("do", "a stage is a process, not a server: it can be killed, stopped, started, restarted, paused or resumed, not promoted")
				return nil
			}
			return &Node{Subject: sub, Do: a.name}
		}
		Register(k)
	}
}

// nodeAction returns the action named name and the one that heals it.
func nodeAction(name string) (func(Nodes, context.Context, string) error, string, bool) {
	for _, a := range nodeActions {
		if a.name == name {
			return a.do, a.heal, true
		}
	}
	return nil, "", false
}

// Node is an action on a node's server or one of its stages. Which node
// and stage exist is the spec's (and the engine's) to check.
type Node struct {
	Subject
	Do string // one of nodeActions
}

// Describe: "node e1 kill", "node t1 replicat kill".
func (f *Node) Describe() string {
	if f.Stage != "" {
		return "node " + f.Node + " " + f.Stage + " " + f.Do
	}
	return "node " + f.Node + " " + f.Do
}

// Parts: the node, or its stage.
func (f *Node) Parts() []Part { return []Part{{Node: f.Node, Stage: f.Stage}} }

// Apply does the action; the heal is the action that undoes it (start
// after kill or stop, resume after pause).
func (f *Node) Apply(ctx context.Context, w World) (Heal, error) {
	do, heal, ok := nodeAction(f.Do)
	if !ok {
		return nil, fmt.Errorf("unknown node action %q", f.Do)
	}
	node := f.Node
	if node == PrimaryNode {
		pf, ok := w.(PrimaryFinder)
		if !ok {
			return nil, fmt.Errorf("node %s: cannot tell which node takes writes here", PrimaryNode)
		}
		var err error
		if node, _, err = pf.Primary(ctx); err != nil {
			return nil, fmt.Errorf("node %s: %w", PrimaryNode, err)
		}
	}
	act := func(ctx context.Context, name string, do func(Nodes, context.Context, string) error) error {
		if f.Stage != "" {
			return w.Stage(ctx, node, f.Stage, name)
		}
		return do(w, ctx, node)
	}
	if err := act(ctx, f.Do, do); err != nil {
		return nil, err
	}
	if heal == "" {
		return nil, nil
	}
	undo, _, _ := nodeAction(heal)
	return func(ctx context.Context) error { return act(ctx, heal, undo) }, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"replab/internal/faultkind"
	"replab/internal/lab"
)

// faultAbout is replab fault --help, with the kinds of faultkind.
func faultAbout() string {
	kinds := faultkind.Default()
	node := strings.Join(kinds.Names(faultkind.OnNode), "|")
	var stage []string
	for _, k := range kinds.On(faultkind.OnNode) {
		if k.Stages {
			stage = append(stage, k.Name)
		}
	}
	return `Breaks a link, a node or a site of a running lab now, from a second shell, and
with --for heals it again after that long (Ctrl-C during --for heals at once).

  replab fault link A<->B down [--for 20s]
      partition: both directions drop every packet
  replab fault link A->B down [--for 20s]
      one-way partition: A->B drops every packet, B->A still carries
  replab fault link A->B loss=5% delay=400ms [--for 20s]
      change one direction (A<->B: both) with link set's keys: delay jitter
      jitter_dist reorder rate queue loss trace seed, down, up
      --for puts back exactly the parameters the directions had before
  replab fault link A<->B flap --every 2s --down 500ms --for 20s
      the link goes down for --down at the start of every --every, until
      --for is over, when its parameters from before are put back
  replab fault node NODE ` + node + ` [--for 10s]
      act on a database server of the lab (its engine must be able to);
      --for heals kill and stop with start, pause with resume
  replab fault node NODE STAGE ` + strings.Join(stage, "|") + ` [--for 10s]
      act on one of the node's replication stages instead (replication =
      "pipeline": extract at the primary; pump, collector, replicat at a
      replica)
  replab fault site SITE isolate [--for 10s]
      every link of the site down, both directions: the site is cut off
  replab fault site SITE cut --from A,B [--for 10s]
      the site's links to A and B down, both directions; its others stay up
  NODE may be @primary: whichever node takes writes now

Every fault applied or healed through the lab (this command and
replab link set) is logged with its wall-clock time in the lab's fault log,
STATE/LAB.faults.log (default /run/replab/LAB.faults.log: tail -f it), and
listed by replab lab status (--json: "faults").`
}

// faultCmd is a parsed replab fault command line: the fault as the lab
// receives it, and its kind.
type faultCmd struct {
	order faultkind.Order
	kind  *faultkind.Kind
}

// parseFault reads the positional arguments of replab fault, --for and the
// kinds' own flags (keys: --every 2s is "every": "2s"), and checks the
// fault's form with its kind; the lab checks the rest.
func parseFault(pos []string, dur time.Duration, keys map[string]string) (faultCmd, error) {
	kinds := faultkind.Default()
	fc := faultCmd{order: faultkind.Order{For: dur}}
	o := &fc.order
	if dur < 0 {
		return fc, fmt.Errorf("fault: --for %s: give a positive duration such as 20s", dur)
	}
	if len(pos) == 0 {
		return fc, errors.New("fault: say what to break: fault link A<->B down | fault node NODE kill | fault site SITE isolate (see replab fault --help)")
	}
	var k *faultkind.Kind
	switch pos[0] {
	case "link":
		if len(pos) < 3 {
			return fc, errors.New("fault link: give a direction and at least one change, e.g. fault link primary<->eu down")
		}
		req, err := lab.ParseDirection(pos[1])
		if err != nil {
			return fc, err
		}
		o.Subject = faultkind.Subject{On: faultkind.OnLink, From: req.From, To: req.To, Both: req.Both}
		if k = kinds.Lookup(pos[2]); k != nil && k.On == faultkind.OnLink && k.Name != faultkind.SetName {
			if len(pos) > 3 {
				return fc, fmt.Errorf("fault link %s %s: give what it takes as flags (%s), not %s", pos[1], k.Name, flagList(k), strings.Join(pos[3:], " "))
			}
		} else {
			k = kinds.Lookup(faultkind.SetName)
			var set []any
			for _, w := range pos[2:] {
				set = append(set, w)
			}
			o.Keys = map[string]any{"set": set}
		}
	case "node":
		if len(pos) != 3 && len(pos) != 4 {
			return fc, fmt.Errorf("fault node: give a node, optionally one of its stages, and one action (%s), e.g. fault node e1 kill or fault node t1 replicat kill", strings.Join(kinds.Names(faultkind.OnNode), ", "))
		}
		o.Subject = faultkind.Subject{On: faultkind.OnNode, Node: pos[1]}
		do := pos[len(pos)-1]
		if k = kinds.Lookup(do); k == nil || k.On != faultkind.OnNode {
			return fc, fmt.Errorf("fault node: unknown action %q: use one of %s", do, strings.Join(kinds.Names(faultkind.OnNode), ", "))
		}
		if len(pos) == 4 {
			o.Subject.Stage = pos[2]
			if !k.Stages {
				return fc, fmt.Errorf("fault node %s %s: a stage is a process, not a server: it cannot be %s", pos[1], pos[2], done(do))
			}
		}
	case "site":
		if len(pos) != 3 {
			return fc, fmt.Errorf("fault site: give a site and what happens to it (%s), e.g. fault site eu isolate", strings.Join(kinds.Names(faultkind.OnSite), ", "))
		}
		o.Subject = faultkind.Subject{On: faultkind.OnSite, Site: pos[1]}
		if k = kinds.Lookup(pos[2]); k == nil || k.On != faultkind.OnSite {
			return fc, fmt.Errorf("fault site: unknown action %q: use one of %s", pos[2], strings.Join(kinds.Names(faultkind.OnSite), ", "))
		}
	default:
		return fc, fmt.Errorf("fault: %q is neither link nor node nor site: fault link A<->B down | fault node NODE kill | fault site SITE isolate", pos[0])
	}
	o.Kind, fc.kind = k.Name, k
	words := strings.Join(pos, " ")
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		if !slices.ContainsFunc(k.Keys, func(x faultkind.Key) bool { return x.Name == key }) {
			owner := kinds.KeyOf(key)
			return fc, fmt.Errorf("fault %s: --%s goes with %s, not with %s", words, key, owner.Name, k.Name)
		}
		if o.Keys == nil {
			o.Keys = map[string]any{}
		}
		o.Keys[key] = keys[key]
	}
	if dur > 0 && k.Instant != "" {
		return fc, fmt.Errorf("fault %s --for: %s %s cannot be healed: only %s last", words, k.On, k.Name, lasting(kinds, k.On))
	}
	if _, _, err := o.Parse(kinds, nil); err != nil {
		return fc, fmt.Errorf("fault %s: %w", words, err)
	}
	return fc, nil
}

// done is an action's past participle, for "it cannot be promoted".
func done(verb string) string {
	if strings.HasSuffix(verb, "e") {
		return verb + "d"
	}
	return verb + "ed"
}

// flagList is a kind's flags: "--every, --down".
func flagList(k *faultkind.Kind) string {
	var out []string
	for _, key := range k.Keys {
		out = append(out, "--"+key.Name)
	}
	return strings.Join(out, ", ")
}

// lasting lists the kinds on subject on that last until healed, with what
// heals them: "kill, stop (healed by start) and pause (healed by resume)".
func lasting(kinds *faultkind.Registry, on string) string {
	var heals []string
	byHeal := map[string][]string{}
	for _, k := range kinds.On(on) {
		if k.Instant != "" || k.Name == faultkind.SetName {
			continue
		}
		if _, ok := byHeal[k.Heal]; !ok {
			heals = append(heals, k.Heal)
		}
		byHeal[k.Heal] = append(byHeal[k.Heal], k.Name)
	}
	var parts []string
	for _, h := range heals {
		parts = append(parts, fmt.Sprintf("%s (healed by %s)", strings.Join(byHeal[h], ", "), h))
	}
	if n := len(parts); n > 1 {
		return strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	return strings.Join(parts, "")
}

func cmdFault(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("fault", "replab fault [--lab NAME] link A->B|A<->B key=value…|down [--for D]\n       replab fault [--lab NAME] link A->B|A<->B flap --every D --down D --for D\n       replab fault [--lab NAME] node NODE [STAGE] "+strings.Join(faultkind.Default().Names(faultkind.OnNode), "|")+" [--for D]\n       replab fault [--lab NAME] site SITE isolate|cut [--from A,B] [--for D]", faultAbout())
	name := fs.String("lab", "", "which lab (needed when several run)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	dur := fs.Duration("for", 0, "heal after this long (0: leave it broken)")
	// Each kind's keys are flags (--every 2s), except set: the words.
	keyFlags := map[string]*string{}
	for _, key := range faultkind.Default().Keys() {
		if key == "set" {
			continue
		}
		k := faultkind.Default().KeyOf(key)
		for _, x := range k.Keys {
			if x.Name == key {
				keyFlags[key] = fs.String(key, "", k.Name+": "+x.About)
			}
		}
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	keys := map[string]string{}
	for key, v := range keyFlags {
		if *v != "" {
			keys[key] = *v
		}
	}
	fc, err := parseFault(pos, *dur, keys)
	if err != nil {
		return err
	}
	c, err := lab.Connect(*state, *name)
	if err != nil {
		return err
	}
	logFile := lab.FaultLogPath(*state, c.Name)
	if err = runFault(ctx, c, fc, out); err == nil {
		fmt.Fprintf(out, "logged in %s\n", logFile)
	}
	return err
}

// runFault applies the fault through the lab and, with --for, heals it
// that much later (or at Ctrl-C).
func runFault(ctx context.Context, c *lab.Client, fc faultCmd, out io.Writer) error {
	o := fc.order
	ans, err := c.Fault(o)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, stamp(ans.Record))
	printDirs(out, ans.Status, o.Subject)
	if o.For == 0 || ans.ID == "" {
		return nil
	}
	wait(ctx, o.For, out)
	rec, err := c.HealFault(ans.ID)
	if err != nil {
		switch o.Subject.On {
		case faultkind.OnLink:
			return fmt.Errorf("heal %s: %w: the link stays as it is (see replab link show)", strings.TrimPrefix(ans.Record.What, "link "), err)
		case faultkind.OnSite:
			return fmt.Errorf("heal %s: %w: its links stay as they are (see replab link show)", ans.Record.What, err)
		}
		what := o.Subject.Node
		if o.Subject.Stage != "" {
			what += " " + o.Subject.Stage
		}
		return fmt.Errorf("heal node %s (%s): %w", what, fc.kind.Heal, err)
	}
	fmt.Fprintf(out, "%s (%s)\n", stamp(rec), fc.kind.Heal)
	if o.Subject.On != faultkind.OnNode {
		if st, err := c.Status(); err == nil {
			printDirs(out, st, o.Subject)
		}
	}
	return nil
}

func stamp(r lab.FaultRecord) string {
	return r.Time.UTC().Format("15:04:05.000") + " " + r.Action + " " + r.What
}

// wait waits d or until ctx ends (Ctrl-C); it says which.
func wait(ctx context.Context, d time.Duration, out io.Writer) {
	fmt.Fprintf(out, "healing in %s (Ctrl-C heals now)\n", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		fmt.Fprintln(out, "interrupted: healing now")
	}
}

// printDirs prints the link directions a fault acts on: its link's, or
// every one of its site's.
func printDirs(out io.Writer, st lab.Status, sub faultkind.Subject) {
	for _, l := range st.Links {
		for _, d := range l.Directions {
			var mine bool
			switch sub.On {
			case faultkind.OnLink:
				mine = d.From == sub.From && d.To == sub.To || sub.Both && d.From == sub.To && d.To == sub.From
			case faultkind.OnSite:
				mine = d.From == sub.Site || d.To == sub.Site
			}
			if mine {
				fmt.Fprintf(out, "  link %-22s %s\n", d.From+"->"+d.To, lab.DescribeParams(d.Params))
			}
		}
	}
}

// printFaults lists the faults applied through the lab (lab status).
func printFaults(out io.Writer, st lab.Status) {
	for _, r := range st.Faults {
		line := "fault " + r.Time.UTC().Format("15:04:05.000") + " " + r.Action + " " + r.What
		if r.Err != "" {
			line += " (error: " + r.Err + ")"
		}
		fmt.Fprintln(out, line)
	}
	if len(st.Faults) > 0 && st.FaultLog != "" {
		fmt.Fprintf(out, "fault log %s\n", st.FaultLog)
	}
}

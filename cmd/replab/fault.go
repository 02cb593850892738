package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"replab/internal/lab"
	"replab/internal/spec"
)

const faultAbout = `Breaks a link or a node of a running lab now, from a second shell, and with
--for heals it again after that long (Ctrl-C during --for heals at once).

  replab fault link A<->B down [--for 20s]
      partition: both directions drop every packet
  replab fault link A->B loss=5% delay=400ms [--for 20s]
      change one direction (A<->B: both) with link set's keys: delay jitter
      jitter_dist reorder rate queue loss trace seed, down, up
      --for puts back exactly the parameters the directions had before
  replab fault node NODE kill|stop|start|restart|pause|resume|promote [--for 10s]
      act on a database server of the lab (its engine must be able to);
      --for heals kill and stop with start, pause with resume
  replab fault node NODE STAGE kill|stop|start|restart|pause|resume [--for 10s]
      act on one of the node's replication stages instead (replication =
      "pipeline": extract at the primary; pump, collector, replicat at a
      replica)

Every fault applied or healed through the lab (this command and
replab link set) is logged with its wall-clock time in the lab's fault log,
STATE/LAB.faults.log (default /run/replab/LAB.faults.log: tail -f it), and
listed by replab lab status (--json: "faults").`

// faultCmd is a parsed replab fault command line.
type faultCmd struct {
	link *lab.LinkRequest
	node *lab.NodeRequest
	For  time.Duration
}

// parseFault reads the positional arguments of replab fault.
func parseFault(pos []string, dur time.Duration) (faultCmd, error) {
	fc := faultCmd{For: dur}
	if dur < 0 {
		return fc, fmt.Errorf("fault: --for %s: give a positive duration such as 20s", dur)
	}
	if len(pos) == 0 {
		return fc, errors.New("fault: say what to break: fault link A<->B down | fault node NODE kill (see replab fault --help)")
	}
	switch pos[0] {
	case "link":
		if len(pos) < 3 {
			return fc, errors.New("fault link: give a direction and at least one change, e.g. fault link primary<->eu down")
		}
		req, err := lab.ParseDirection(pos[1])
		if err != nil {
			return fc, err
		}
		req.Set = pos[2:]
		fc.link = &req
	case "node":
		if len(pos) != 3 && len(pos) != 4 {
			return fc, fmt.Errorf("fault node: give a node, optionally one of its stages, and one action (%s), e.g. fault node e1 kill or fault node t1 replicat kill", strings.Join(spec.FaultDos, ", "))
		}
		req := lab.NodeRequest{Node: pos[1], Do: pos[len(pos)-1]}
		if len(pos) == 4 {
			req.Stage = pos[2]
			if req.Do == spec.FaultPromote {
				return fc, fmt.Errorf("fault node %s %s: a stage is a process, not a server: it cannot be promoted", req.Node, req.Stage)
			}
		}
		if !slices.Contains(spec.FaultDos, req.Do) {
			return fc, fmt.Errorf("fault node: unknown action %q: use one of %s", req.Do, strings.Join(spec.FaultDos, ", "))
		}
		if dur > 0 {
			if _, err := lab.HealOf(req.Do); err != nil {
				return fc, fmt.Errorf("fault node %s %s --for: %w", req.Node, req.Do, err)
			}
		}
		fc.node = &req
	default:
		return fc, fmt.Errorf("fault: %q is neither link nor node: fault link A<->B down | fault node NODE kill", pos[0])
	}
	return fc, nil
}

func cmdFault(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("fault", "replab fault [--lab NAME] link A->B|A<->B key=value…|down [--for D]\n       replab fault [--lab NAME] node NODE kill|stop|start|restart|pause|resume|promote [--for D]", faultAbout)
	name := fs.String("lab", "", "which lab (needed when several run)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	dur := fs.Duration("for", 0, "heal after this long (0: leave it broken)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	fc, err := parseFault(pos, *dur)
	if err != nil {
		return err
	}
	c, err := lab.Connect(*state, *name)
	if err != nil {
		return err
	}
	logFile := lab.FaultLogPath(*state, c.Name)
	if fc.link != nil {
		err = faultLink(ctx, c, *fc.link, fc.For, out)
	} else {
		err = faultNode(ctx, c, *fc.node, fc.For, out)
	}
	if err == nil {
		fmt.Fprintf(out, "logged in %s\n", logFile)
	}
	return err
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

func printDirs(out io.Writer, st lab.Status, req lab.LinkRequest) {
	for _, l := range st.Links {
		for _, d := range l.Directions {
			if (d.From == req.From && d.To == req.To) || (req.Both && d.From == req.To && d.To == req.From) {
				fmt.Fprintf(out, "  link %-22s %s\n", d.From+"->"+d.To, lab.DescribeParams(d.Params))
			}
		}
	}
}

func faultLink(ctx context.Context, c *lab.Client, req lab.LinkRequest, d time.Duration, out io.Writer) error {
	if d == 0 {
		st, err := c.SetLink(req)
		if err != nil {
			return err
		}
		if n := len(st.Faults); n > 0 {
			fmt.Fprintln(out, stamp(st.Faults[n-1]))
		}
		printDirs(out, st, req)
		return nil
	}
	ans, err := c.LinkFault(req)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, stamp(ans.Record))
	printDirs(out, ans.Status, req)
	wait(ctx, d, out)
	rec, err := c.HealLink(ans.ID)
	if err != nil {
		return fmt.Errorf("heal %s: %w: the link stays as it is (see replab link show)", strings.TrimPrefix(ans.Record.What, "link "), err)
	}
	fmt.Fprintln(out, stamp(rec)+" (parameters before it put back)")
	if st, err := c.Status(); err == nil {
		printDirs(out, st, req)
	}
	return nil
}

func faultNode(ctx context.Context, c *lab.Client, req lab.NodeRequest, d time.Duration, out io.Writer) error {
	rec, err := c.Node(req)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, stamp(rec))
	if d == 0 {
		return nil
	}
	wait(ctx, d, out)
	req.Heal = true
	rec, err = c.Node(req)
	if err != nil {
		h, _ := lab.HealOf(req.Do)
		what := req.Node
		if req.Stage != "" {
			what += " " + req.Stage
		}
		return fmt.Errorf("heal node %s (%s): %w", what, h, err)
	}
	h, _ := lab.HealOf(req.Do)
	fmt.Fprintf(out, "%s (%s)\n", stamp(rec), h)
	return nil
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

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"replab/internal/lab"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/storage"
	"replab/internal/units"
)

func cmdLab(ctx context.Context, args []string, out io.Writer) error {
	subs := map[string]func(context.Context, []string, io.Writer) error{
		"up": cmdLabUp, "down": cmdLabDown, "status": cmdLabStatus, "check": cmdLabCheck,
	}
	if len(args) == 0 || subs[args[0]] == nil {
		if len(args) > 0 && args[0] != "-h" && args[0] != "--help" {
			return fmt.Errorf("unknown lab command %q: use lab up FILE | lab down [NAME] | lab status [--json] | lab check FILE", args[0])
		}
		fmt.Fprint(out, `Usage: replab lab up FILE       build the lab and keep it up until Ctrl-C
       replab lab check FILE    build it, measure RTT and throughput of every link, tear it down
       replab lab status [--json] [--lab NAME]
       replab lab down [NAME]   remove a lab (all labs without NAME), also after a crash
`)
		return nil
	}
	return subs[args[0]](ctx, args[1:], out)
}

func loadSpec(fs interface{ Name() string }, pos []string) (*spec.Spec, error) {
	if len(pos) != 1 {
		return nil, fmt.Errorf("%s: give exactly one spec file (e.g. examples/two-sites.toml)", fs.Name())
	}
	s, err := spec.Load(pos[0])
	if err != nil {
		return nil, err
	}
	return s, needsLab(s, fs.Name())
}

// needsLab refuses a target spec where a lab is built.
func needsLab(s *spec.Spec, cmd string) error {
	if s.Target != nil {
		return fmt.Errorf("%s: %s has [target]: it names servers that exist, and there is no lab to build; measure them with replab run", cmd, s.File)
	}
	return nil
}

func cmdLabUp(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("lab up", "replab lab up FILE [--series CSV]",
		`Builds the lab described by FILE (sites, links), prints one line per site and
link, then "ready", and keeps it up until SIGINT/SIGTERM; then removes everything.`)
	series := fs.String("series", "", "write per-second link counters to this CSV file")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("lab up: give exactly one spec file (e.g. examples/two-sites.toml)")
	}
	s, eng, err := loadChecked(pos[0])
	if err != nil {
		return err
	}
	if err := needsLab(s, "lab up"); err != nil {
		return err
	}
	for _, w := range s.Warnings() {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	for _, w := range runner.ProvisionWarnings(s, engines(), workloads()) {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	if s.Lab.Hosts == spec.HostsIsolated {
		for _, line := range s.HostsLines() {
			fmt.Fprintln(out, line)
		}
	}
	fmt.Fprintf(out, "lab %s: building %d sites and %d links\n", s.Lab.Name, len(s.Sites), len(s.Links))
	l, err := lab.Up(ctx, s, lab.Options{StateRoot: *state, Log: out, SeriesCSV: *series})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintf(out, "lab %s: tearing down\n", s.Lab.Name)
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "replab: teardown:", err)
		}
		fmt.Fprintf(out, "lab %s: removed\n", s.Lab.Name)
	}()
	st := l.Status()
	printSites(out, st)
	printLinks(out, st, false)
	cluster, err := startCluster(ctx, eng, l, out)
	if err != nil {
		return err
	}
	if cluster != nil {
		defer cluster.Close()
		defer l.SetNodeControl(nil) // before the servers go: no fault reaches a closed cluster
		printNodes(out, l.Status())
	}
	fmt.Fprintln(out, "ready")
	<-ctx.Done()
	for _, w := range l.Status().Warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	return nil
}

func cmdLabDown(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("lab down", "replab lab down [NAME]",
		`Removes a lab: stops its process if it still runs, then deletes whatever it
left behind (namespaces, cgroups, processes, sysctl changes). Without NAME,
removes every replab lab on this machine.`)
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return errors.New("lab down: give at most one lab name")
	}
	if err := lab.Preflight(); err != nil {
		return err
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
	}
	done, err := lab.Down(ctx, *state, name)
	for _, d := range done {
		fmt.Fprintln(out, "removed", d)
	}
	if err == nil && len(done) == 0 {
		fmt.Fprintln(out, "nothing to remove")
	}
	return err
}

func cmdLabStatus(ctx context.Context, args []string, out io.Writer) error {
	return status(newFlags("lab status", "replab lab status [--json] [--lab NAME]",
		"Prints the running lab: sites with addresses, links with parameters and counters."), args, out)
}

func cmdLinkShow(ctx context.Context, args []string, out io.Writer) error {
	return status(newFlags("link show", "replab link show [--json] [--lab NAME]",
		"Prints the running lab's links with their parameters and live counters (with its sites, as lab status)."), args, out)
}

// status is lab status and link show.
func status(fs *flag.FlagSet, args []string, out io.Writer) error {
	asJSON := fs.Bool("json", false, "print JSON")
	name := fs.String("lab", "", "which lab (needed when several run)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c, err := lab.Connect(*state, *name)
	if err != nil {
		return err
	}
	st, err := c.Status()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	fmt.Fprintf(out, "lab %s (pid %d, up %s)\n", st.Name, st.PID, time.Since(st.Started).Round(time.Second))
	printSites(out, st)
	printLinks(out, st, true)
	printNodes(out, st)
	printFaults(out, st)
	for _, w := range st.Warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	return nil
}

func printSites(out io.Writer, st lab.Status) {
	for _, s := range st.Sites {
		extra := ""
		if s.CPUCores > 0 {
			extra += fmt.Sprintf(" cpu=%g", s.CPUCores)
		}
		if s.MemoryBytes > 0 {
			extra += " memory=" + units.Bytes(float64(s.MemoryBytes))
		}
		if s.TCP != "" {
			extra += " (" + s.TCP + ")"
		}
		fmt.Fprintf(out, "site %-12s %-15s netns %s tcp=%s%s\n", s.Name, s.Address, s.Netns, s.TCPCongestion, extra)
	}
}

func printLinks(out io.Writer, st lab.Status, counters bool) {
	for _, l := range st.Links {
		for _, d := range l.Directions {
			fmt.Fprintf(out, "link %-22s %s\n", d.From+"->"+d.To, lab.DescribeParams(d.Params))
			if counters {
				c := d.Counters
				fmt.Fprintf(out, "     delivered %d pkts / %s, dropped queue %d loss %d other %d, queue %s (max %s), lateness p99 %.0f µs\n",
					c.DeliveredPackets, units.Bytes(float64(int64(c.DeliveredBytes))), c.DroppedQueuePackets, c.DroppedLossPackets,
					c.DroppedOtherPackets, units.Bytes(float64(c.QueueBytes)), units.Bytes(float64(c.QueueHighWaterBytes)), d.Lateness.P99Us)
			}
		}
	}
}

func cmdLabCheck(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("lab check", "replab lab check FILE [--duration 3s] [--probes 20]",
		`Builds the lab, measures every link direction (RTT by UDP echo, TCP goodput),
prints measured against configured values, and tears the lab down.`)
	dur := fs.Duration("duration", 3*time.Second, "TCP goodput measuring time per direction (after warmup)")
	probes := fs.Int("probes", 20, "RTT probes per link")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	s, err := loadSpec(fs, pos)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "lab %s: building %d sites and %d links\n", s.Lab.Name, len(s.Sites), len(s.Links))
	l, err := lab.Up(ctx, s, lab.Options{StateRoot: *state, Log: out})
	if err != nil {
		return err
	}
	defer l.Close()
	st := l.Status()
	printSites(out, st)
	fmt.Fprintln(out, "ready; measuring every link (this takes a few seconds per direction)")
	rows, err := lab.Check(ctx, l, lab.CheckOptions{Probes: *probes, Duration: *dur, Progress: out})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	lab.WriteCheckTable(out, rows)
	for _, w := range l.Status().Warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	fmt.Fprintf(out, "lab %s: tearing down\n", s.Lab.Name)
	if err := l.Close(); err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	fmt.Fprintf(out, "lab %s: removed\n", s.Lab.Name)
	return nil
}

func cmdValidate(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("validate", "replab validate FILE", `Checks a spec as replab run would — the lab, the engine's nodes and scheme,
the workload, and every point of a sweep — and reports every error at once;
then prints its sites, links and nodes with every default resolved.`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("validate: give exactly one spec file")
	}
	s, eng, err := loadChecked(pos[0])
	if err != nil {
		return err
	}
	if t := s.Target; t != nil {
		fmt.Fprintf(out, "target %s: %s, %d nodes, replab's tables in schema %s (create_schema = %t, keep_schema = %t)\n", t.Name, t.Engine, len(t.Nodes), t.Schema, t.CreateSchema, t.KeepSchema)
		for _, n := range t.Nodes {
			how := "lag polled from this host"
			if n.Agent != "" {
				how = "lag from the agent at " + n.Agent
			}
			fmt.Fprintf(out, "node %-10s %-8s site %-8s %s %s; %s\n", n.Name, n.Role, n.Site, n.From, n.DSN, how)
		}
		return nil
	}
	fmt.Fprintf(out, "lab %s: %d sites, %d links, %d nodes\n", s.Lab.Name, len(s.Sites), len(s.Links), len(s.Nodes))
	for _, line := range s.HostsLines() {
		fmt.Fprintln(out, line)
	}
	for _, st := range s.Sites {
		if d := st.TCP.Describe(); d != "" {
			fmt.Fprintf(out, "site %-12s tcp=%s %s\n", st.Name, st.TCP.Congestion, d)
		}
	}
	for _, lk := range s.Links {
		fmt.Fprintf(out, "link %-22s %s\n", lk.A+"->"+lk.B, lab.DescribeParams(lk.Forward))
		fmt.Fprintf(out, "link %-22s %s\n", lk.B+"->"+lk.A, lab.DescribeParams(lk.Reverse))
	}
	for _, st := range s.Storages {
		fmt.Fprintf(out, "storage %-10s %s\n", st.Name, storage.Describe(st))
	}
	for _, n := range s.Nodes {
		where := ""
		if n.Storage != "" {
			where = " storage " + n.Storage
		}
		fmt.Fprintf(out, "node %-10s %-8s site %s %s%s\n", n.Name, n.Role, n.Site, n.From, where)
	}
	for _, cl := range s.Clients {
		fmt.Fprintln(out, cl.String())
	}
	for _, f := range s.Faults {
		heal := ""
		if f.For > 0 {
			heal = " for " + f.For.String()
		}
		fmt.Fprintf(out, "fault at %s%s: %s\n", f.At, heal, f.Describe())
	}
	if ls := s.Run.LinkSearch; ls != nil {
		fmt.Fprintf(out, "search: %s\n", runner.DescribeLinkSearch(s))
	}
	if plan := runner.VerifyPlan(s, eng); plan != "" {
		fmt.Fprintf(out, "verify: %s\n", plan)
	}
	for _, w := range s.Warnings() {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	for _, w := range runner.ProvisionWarnings(s, engines(), workloads()) {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	return nil
}

func cmdPresets(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("presets", "replab presets", `Lists link presets; use one in a spec with preset = "NAME" in a [[link]].`)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	for _, p := range spec.Presets() {
		fmt.Fprintf(out, "%-16s %s\n%16s %s\n", p.Name, p.Description, "", lab.DescribeParams(p.Params))
	}
	return nil
}

func cmdExec(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("exec", "replab exec [--lab NAME] SITE -- CMD [ARGS…]",
		`Runs CMD inside SITE of a running lab (its network namespace and cgroups)
and exits with CMD's exit status.`)
	name := fs.String("lab", "", "which lab (needed when several run)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	// Flags only before SITE: everything after it belongs to CMD.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp // flag has printed fs.Usage
		}
		return fmt.Errorf("exec: %w (see replab exec --help)", err)
	}
	rest := fs.Args()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) < 2 {
		return errors.New("exec: give a site and a command: replab exec SITE -- CMD [ARGS…]")
	}
	site, argv := rest[0], rest[1:]
	if argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return errors.New("exec: no command after --")
	}
	ns, cgs, err := lab.SiteNetns(*state, *name, site)
	if err != nil {
		return err
	}
	return lab.EnterAndExec(ns, cgs, argv)
}

// cmdEnter is the hidden shim `replab __enter --netns NS [--cgroup DIR]… -- CMD…`.
func cmdEnter(args []string) int {
	var ns string
	var cgs []string
	for len(args) > 0 && args[0] != "--" {
		if len(args) < 2 {
			break
		}
		switch args[0] {
		case "--netns":
			ns = args[1]
		case "--cgroup":
			cgs = append(cgs, args[1])
		}
		args = args[2:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	err := lab.EnterAndExec(ns, cgs, args)
	fmt.Fprintln(os.Stderr, "replab:", err)
	return 127
}

func cmdLink(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "show") {
		fmt.Fprint(out, `Usage: replab link show [--lab NAME] [--json]
       replab link set [--lab NAME] A->B|A<->B key=value…

Keys are the spec's direction keys: delay jitter jitter_dist reorder rate queue
loss trace seed, and the words down / up. Examples:
  replab link set primary->eu delay=80ms rate=2mbit loss=1%
  replab link set primary<->eu down
`)
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
			return nil
		}
		return fmt.Errorf("unknown link command %q", args[0])
	}
	if args[0] == "show" {
		return cmdLinkShow(ctx, args[1:], out)
	}
	fs := newFlags("link set", "replab link set [--lab NAME] A->B|A<->B key=value…",
		"Changes a running link: A->B one direction, A<->B both.")
	name := fs.String("lab", "", "which lab (needed when several run)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return errors.New("link set: give a direction and at least one change, e.g. link set primary->eu delay=80ms")
	}
	req, err := lab.ParseDirection(pos[0])
	if err != nil {
		return err
	}
	req.Set = pos[1:]
	c, err := lab.Connect(*state, *name)
	if err != nil {
		return err
	}
	st, err := c.SetLink(req)
	if err != nil {
		return err
	}
	for _, l := range st.Links {
		for _, d := range l.Directions {
			if (d.From == req.From && d.To == req.To) || (req.Both && d.From == req.To && d.To == req.From) {
				fmt.Fprintf(out, "link %-22s %s\n", d.From+"->"+d.To, lab.DescribeParams(d.Params))
			}
		}
	}
	return nil
}

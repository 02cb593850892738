package spec

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
)

// [lab] hosts: whether sites share the machine's CPU as it comes
// (HostsShared, the default: a site's cpu, when set, is a cap) or each is a
// host with a CPU budget of its own (HostsIsolated): the machine's cores,
// less what replab itself needs, divided between the sites by weight.
const (
	HostsShared   = "shared"
	HostsIsolated = "isolated"
	// DefaultReserveCores is what an isolated lab keeps for replab's own
	// process — the driver, the link emulator, the lag watchers and the
	// monitors — when [lab] reserve is not written. It is an estimate from
	// this project's measurements (docs/lab.md, "Hosts with budgets"): the
	// driver's 17 µs of CPU per committed transaction
	// (bench/results/driver.json, 0.25 cores at 14,600 tx/s), the link
	// emulator's 1.29 cores at 4.6 Gbit/s (bench/results/linkem.json,
	// about 0.03 cores per 100 Mbit/s carried) and the 1 Hz monitors; a run
	// measures what replab did use and warns when it was more.
	DefaultReserveCores = 0.5
	// MinBudgetCores is the smallest budget a site can have: the kernel's
	// smallest CFS quota (1 ms per 1 s period).
	MinBudgetCores = 0.001
)

var hostsModes = []string{HostsShared, HostsIsolated}

// machineCores is the number of cores this machine gives replab: the CPUs
// its process may run on (the scheduler's affinity mask).
func (e *env) machineCores() float64 {
	if e != nil && e.cores > 0 {
		return e.cores
	}
	return float64(runtime.NumCPU())
}

// hosts reads [lab] hosts, reserve and the sites' weight, and in an
// isolated lab gives every site without a cpu of its own its budget.
func (c *decoder) hosts(s *Spec, m map[string]any) {
	p := path{"lab"}
	lab := &s.Lab
	lab.Hosts = HostsShared
	if v, ok := c.get(p, m, "hosts", kString, `"shared" or "isolated"`); ok {
		h := strings.TrimSpace(v.(string))
		if contains(hostsModes, h) {
			lab.Hosts = h
		} else {
			c.fail(p.child("hosts"), v, `want "shared" (the sites share the machine's CPU; a site's cpu is a cap) or "isolated" (every site is a host with a CPU budget of its own)%s`, didYouMean(h, hostsModes))
		}
	}
	isolated := lab.Hosts == HostsIsolated
	if v, ok := c.get(p, m, "reserve", kNumber, "a number of cores, like 0.5"); ok {
		f := v.(float64)
		switch {
		case !isolated:
			c.fail(p.child("reserve"), m["reserve"], `has no effect without hosts = "isolated": it is what an isolated lab keeps for replab itself`)
		case !(f >= 0 && f <= 1024):
			c.fail(p.child("reserve"), m["reserve"], "want a number of cores from 0 to 1024, like 0.5")
		default:
			lab.ReserveCores = f
		}
	} else if isolated {
		lab.ReserveCores = DefaultReserveCores
	}
	for i := range s.Sites {
		st := &s.Sites[i]
		if st.Weight > 0 && !isolated {
			c.fail(path{"site", st.Name, "weight"}, nil, `has no effect without [lab] hosts = "isolated": a weight divides the machine between isolated hosts`)
		}
		if st.Weight == 0 && isolated {
			st.Weight = 1
		}
	}
	if !isolated {
		return
	}
	lab.MachineCores = c.env.machineCores()
	c.budgets(s)
}

// budgets divides what the machine gives among an isolated lab's sites:
// its cores less the reserve, less the sites' own cpu, shared by weight,
// each budget rounded down to a thousandth of a core so that they never
// add up to more than the machine.
func (c *decoder) budgets(s *Spec) {
	lab := &s.Lab
	hp := path{"lab", "hosts"}
	avail := lab.MachineCores - lab.ReserveCores
	var own, weights float64
	var asked, weighted []string
	for _, st := range s.Sites {
		if st.CPUCores > 0 {
			own += st.CPUCores
			asked = append(asked, fmt.Sprintf("site %s cpu = %s at line %d", st.Name, formatCores(st.CPUCores), c.d.line(path{"site", st.Name, "cpu"})))
			continue
		}
		weights += st.Weight
		weighted = append(weighted, st.Name)
	}
	machine := fmt.Sprintf("this machine has %s cores, of which replab keeps %s ([lab] reserve)", formatCores(lab.MachineCores), formatCores(lab.ReserveCores))
	if avail <= 0 {
		c.fail(hp, nil, "%s: nothing is left for the sites; lower reserve, or use hosts = \"shared\"", machine)
		return
	}
	if own > avail+1e-9 {
		c.fail(hp, nil, "the sites ask for %s cores (%s) but %s, so %s are left: lower their cpu or the reserve, or use hosts = \"shared\"",
			formatCores(own), strings.Join(asked, ", "), machine, formatCores(avail))
		return
	}
	if len(weighted) == 0 {
		return
	}
	left := avail - own
	for i := range s.Sites {
		st := &s.Sites[i]
		if st.CPUCores > 0 {
			continue
		}
		b := math.Floor(left*st.Weight/weights*1000+1e-9) / 1000
		if b < MinBudgetCores {
			what := fmt.Sprintf("the sites' own cpu (%s) leaves %s cores", strings.Join(asked, ", "), formatCores(left))
			if own == 0 {
				what = fmt.Sprintf("that leaves %s cores", formatCores(left))
			}
			c.fail(hp, nil, "%s; %s for %s (weights %s of %s): site %s would get %s cores, below the least of %s; give fewer sites their own cpu, lower the reserve, or use hosts = \"shared\"",
				machine, what, strings.Join(weighted, ", "), formatCores(st.Weight), formatCores(weights), st.Name, formatCores(b), formatCores(MinBudgetCores))
			return
		}
		st.CPUCores, st.CPUBudget = b, true
	}
}

// readWeight reads a site's weight (its share in an isolated lab).
func (c *decoder) readWeight(p path, m map[string]any, st *Site) {
	v, ok := c.get(p, m, "weight", kNumber, "a number like 1 or 2")
	if !ok {
		return
	}
	f := v.(float64)
	switch {
	case !(f > 0 && f <= 1000):
		c.fail(p.child("weight"), m["weight"], "want a number above 0 and at most 1000: the site's share of the machine against the other sites' weights (1 each by default)")
	case m["cpu"] != nil:
		c.fail(p.child("weight"), m["weight"], "the site has its own cpu, which wins over a weight: remove one of them")
	default:
		st.Weight = f
	}
}

// formatCores writes a number of cores as briefly as it is exact to a
// millionth of a core (sums and differences of budgets carry float noise).
func formatCores(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e6)/1e6, 'g', -1, 64)
}

// HostsLines describe how a lab shares the machine's CPU, as `replab
// validate` and `replab lab up` print it: for an isolated lab a line with
// the machine, the reserve and what is left for the sites, then one per
// site with its budget and where it comes from; for a shared lab one per
// site, with its cpu cap when it has one.
func (s *Spec) HostsLines() []string {
	var out []string
	isolated := s.Lab.Hosts == HostsIsolated
	var weights float64
	for _, st := range s.Sites {
		if st.CPUBudget {
			weights += st.Weight
		}
	}
	if isolated {
		var sum float64
		for _, st := range s.Sites {
			sum += st.CPUCores
		}
		out = append(out, fmt.Sprintf("hosts isolated: %s cores, %s kept for replab (driver, link emulator, monitors), %s given to %d sites",
			formatCores(s.Lab.MachineCores), formatCores(s.Lab.ReserveCores), formatCores(math.Round(sum*1000)/1000), len(s.Sites)))
	}
	for _, st := range s.Sites {
		line := fmt.Sprintf("site %-12s %-15s", st.Name, st.Address)
		switch {
		case isolated && st.CPUBudget:
			line += fmt.Sprintf(" cpu %s (weight %s of %s)", formatCores(st.CPUCores), formatCores(st.Weight), formatCores(weights))
		case isolated:
			line += fmt.Sprintf(" cpu %s (its own cpu)", formatCores(st.CPUCores))
		case st.CPUCores > 0:
			line += fmt.Sprintf(" cpu at most %s (shared)", formatCores(st.CPUCores))
		default:
			line += " cpu shared"
		}
		out = append(out, strings.TrimRight(line, " "))
	}
	return out
}

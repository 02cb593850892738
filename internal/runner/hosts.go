package runner

import (
	"fmt"
	"time"

	"replab/internal/spec"
)

// ownCPU is replab's own CPU time at a moment: the driver, the link
// emulator, the lag watchers and the monitors all run in this process.
type ownCPU struct {
	cpu time.Duration
	at  time.Time
}

func startOwnCPU() ownCPU { return ownCPU{cpu: processCPU(), at: time.Now()} }

// cores is the cores this process used since o.
func (o ownCPU) cores() float64 {
	wall := time.Since(o.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return (processCPU() - o.cpu).Seconds() / wall
}

// checkReserve says, in an isolated lab, how much of the CPU kept for
// replab ([lab] reserve) replab used while the driver ran, and warns when
// it used more: then replab and the sites' budgets competed for the
// machine, and the budgets were not what the sites got.
func (r *run) checkReserve(o ownCPU) {
	lab := r.s.Lab
	if lab.Hosts != spec.HostsIsolated || r.opt.Offline {
		return
	}
	used := o.cores()
	if used > lab.ReserveCores {
		fmt.Fprintf(r.log, "warning: replab itself (driver, link emulator, monitors) used %.2f cores while the workload ran, more than the %g kept for it ([lab] reserve): it took CPU the sites' budgets count on; raise reserve\n",
			used, lab.ReserveCores)
		return
	}
	fmt.Fprintf(r.log, "hosts: replab itself used %.2f of the %g cores kept for it while the workload ran\n", used, lab.ReserveCores)
}

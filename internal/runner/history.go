package runner

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	hcheck "replab/internal/check"
	"replab/internal/driver"
	"replab/internal/history"
	"replab/internal/report"
	"replab/internal/workload"
)

// The history ([run] history, docs/consistency.md): recorded by the
// driver into the measurement's history.jsonl, checked when the
// measurement ends (check.json, anomalies.csv, summary.json consistency).
// Each repetition records and checks its own.

// maxWitnesses bounds the witnesses the check keeps while it places the
// anomalies on the run's seconds (check.json keeps check's default).
const maxWitnesses = 1_000_000

// historyOn says whether this run records its history: [run] history, by
// default on for a workload made for checking.
func (r *run) historyOn() bool {
	hd, ok := r.wl.(workload.HistoryByDefault)
	return r.s.HistoryOn(ok && hd.HistoryByDefault())
}

// startHistory creates dir's history.jsonl and hands it to the driver
// (with nodeOf, which names a pool's node); nil when the run records none.
func (r *run) startHistory(dir *report.Dir, cfg *driver.Config, nodeOf func(*sql.DB) string) (*history.Writer, error) {
	if !r.historyOn() {
		return nil, nil
	}
	w, err := history.Create(dir.File(history.FileName))
	if err != nil {
		return nil, err
	}
	cfg.History, cfg.NodeOf = w, nodeOf
	return w, nil
}

// checkHistory checks dir's history once the measurement is over and puts
// the verdict in the summary; closeErr is the history's closing error.
// Nothing here fails the run: a history that cannot be checked says why
// in consistency.error.
func (r *run) checkHistory(ctx context.Context, dir *report.Dir, closeErr error) {
	c := &report.Consistency{}
	r.sum.Consistency = c
	if r.res != nil && r.res.History != nil {
		c.Operations, c.MeasureOperations = r.res.History.Operations, r.res.History.Measure
	}
	switch {
	case r.res == nil:
		c.Error = "the driver did not run to its end"
		return
	case closeErr != nil:
		c.Error = closeErr.Error()
		return
	case ctx.Err() != nil:
		c.Error = "interrupted; check it with replab check " + dir.Path
		return
	}
	fmt.Fprintf(r.log, "checking the history: %d operations\n", c.Operations)
	t0 := time.Now()
	res, err := hcheck.File(dir.File(history.FileName), hcheck.Options{MaxWitnesses: maxWitnesses})
	secs := math.Round(time.Since(t0).Seconds()*1000) / 1000
	if err != nil {
		c.Error, c.CheckSeconds = err.Error(), secs
		fmt.Fprintf(r.log, "warning: %v\n", err)
		return
	}
	rows := report.AnomaliesPerSecond(res, r.res.StartNs)
	for class, ws := range res.Witnesses {
		if len(ws) > hcheck.DefaultMaxWitnesses {
			res.Witnesses[class] = ws[:hcheck.DefaultMaxWitnesses]
		}
	}
	nc := report.NewConsistency(res)
	nc.Operations, nc.MeasureOperations, nc.CheckSeconds = c.Operations, c.MeasureOperations, secs
	if res.Keys.List+res.Keys.Register == 0 && c.Operations > 0 {
		// Times and outcomes alone: every model would hold, vacuously.
		nc.Error = fmt.Sprintf("the workload %s records no micro-operations (list-append and rw-register do): history.jsonl has each operation's times and outcome, nothing to check", r.wl.Name())
	}
	r.sum.Consistency = nc
	if err := res.WriteJSONFile(dir.File(report.CheckFile)); err != nil {
		nc.Error = err.Error()
	}
	if err := dir.WriteAnomalies(rows); err != nil {
		fmt.Fprintf(r.log, "warning: %s: %v\n", report.AnomaliesFile, err)
	}
	if nc.Error == "" && res.Keys.List+res.Keys.Register > 0 {
		r.staleReads(dir)
	}
}

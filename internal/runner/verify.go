package runner

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/report"
)

// checkConvergence compares the workload's tables across every full copy
// once the cluster flows again, for engines that can checksum. A
// divergence is a result, not an error: the run reports it loudly.
func (r *run) checkConvergence(ctx context.Context, stopped time.Time) *report.Convergence {
	cs, ok := r.cluster.(engine.Checksummer)
	if !ok || len(r.cluster.Nodes()) < 2 || ctx.Err() != nil {
		return nil
	}
	var tables []string
	for _, t := range r.wl.Schema().Tables {
		tables = append(tables, t.Name)
	}
	if len(tables) == 0 {
		return nil
	}
	fmt.Fprintf(r.log, "comparing the copies: %d tables at every node\n", len(tables))
	conv := &report.Convergence{Tables: len(tables)}
	wctx, cancel := context.WithTimeout(ctx, r.catchUpTimeout())
	defer cancel()
	if err := r.cluster.WaitFlowing(wctx); err != nil {
		conv.Error = fmt.Sprintf("the cluster was not flowing within %s: %v", r.catchUpTimeout(), err)
		return conv
	}
	sums, err := cs.Checksums(wctx, tables...)
	conv.CheckedAfterS = math.Round(time.Since(stopped).Seconds()*1000) / 1000
	if err != nil {
		conv.Error = fmt.Sprintf("checksums: %v", err)
		return conv
	}
	conv.Nodes = len(sums)
	conv.Diverged = divergedTables(sums, tables)
	conv.DivergedTables = len(conv.Diverged)
	conv.Converged = conv.DivergedTables == 0
	if !conv.Converged {
		fmt.Fprintf(r.log, "warning: the copies diverged in %d of %d tables\n", conv.DivergedTables, len(tables))
	}
	return conv
}

// divergedTables names every table whose checksum is not the same at
// every node, with each node's sum.
func divergedTables(sums map[string]map[string]int64, tables []string) map[string]string {
	nodes := slices.Sorted(maps.Keys(sums))
	out := map[string]string{}
	for _, t := range tables {
		distinct := map[int64]bool{}
		var parts []string
		for _, n := range nodes {
			v, ok := sums[n][t]
			if !ok {
				parts = append(parts, n+" missing")
				distinct[0], distinct[-1] = true, true // a missing table differs
				continue
			}
			distinct[v] = true
			parts = append(parts, fmt.Sprintf("%s %d", n, v))
		}
		if len(distinct) > 1 {
			out[t] = strings.Join(parts, ", ")
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

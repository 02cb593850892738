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
	conv.Diverged = divergedTables(sums)
	conv.DivergedTables = len(conv.Diverged)
	conv.Converged = conv.DivergedTables == 0
	if !conv.Converged {
		fmt.Fprintf(r.log, "warning: the copies diverged in %d of %d tables\n", conv.DivergedTables, len(tables))
	}
	return conv
}

// divergedTables names every table whose checksum is not the same at
// every node, with each node's sum.
func divergedTables(sums map[string]map[string]int64) map[string]string {
	nodes := slices.Sorted(maps.Keys(sums))
	out := map[string]string{}
	for _, d := range engine.Diverged(sums) {
		parts := make([]string, len(nodes))
		for i, n := range nodes {
			if v, ok := d.Sums[n]; ok {
				parts[i] = fmt.Sprintf("%s %d", n, v)
			} else {
				parts[i] = n + " missing"
			}
		}
		out[d.Table] = strings.Join(parts, ", ")
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

package runner

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/workload"
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
	if len(sums) < 2 {
		// After a failover, or with every replica partial: one copy
		// agrees with itself, which proves nothing.
		conv.Error = fmt.Sprintf("only %d node holds a full copy now: nothing to compare it with", len(sums))
		return conv
	}
	conv.Diverged = divergedTables(sums)
	conv.DivergedTables = len(conv.Diverged)
	conv.Converged = conv.DivergedTables == 0
	if !conv.Converged {
		fmt.Fprintf(r.log, "warning: the copies diverged in %d of %d tables\n", conv.DivergedTables, len(tables))
	}
	r.divergedRows(wctx, conv, slices.Sorted(maps.Keys(sums)))
	return conv
}

// divergedRows counts, for a workload that lists its rows
// (workload.RowLister), the rows not the same at every node compared (a
// row missing at one counts): 0 when the checksums agreed.
func (r *run) divergedRows(ctx context.Context, conv *report.Convergence, nodes []string) {
	rl, ok := r.wl.(workload.RowLister)
	sc, isSQL := r.cluster.(engine.SQL)
	if !ok || !isSQL {
		return
	}
	var n int64
	if conv.Converged {
		conv.DivergedRows = &n
		return
	}
	site := map[string]string{}
	for _, nd := range r.nodes {
		site[nd.Name] = nd.Site
	}
	for table, q := range rl.RowQueries() {
		if _, diverged := conv.Diverged[table]; !diverged {
			continue
		}
		rows := map[string]map[string]string{} // key → node → content
		for _, node := range nodes {
			got, err := listRows(ctx, sc, node, site[node], q)
			if err != nil {
				fmt.Fprintf(r.log, "warning: rows of %s at %s: %v\n", table, node, err)
				return
			}
			for k, v := range got {
				if rows[k] == nil {
					rows[k] = map[string]string{}
				}
				rows[k][node] = v
			}
		}
		for _, at := range rows {
			if len(at) < len(nodes) {
				n++
				continue
			}
			var first string
			for i, node := range nodes {
				if i == 0 {
					first = at[node]
				} else if at[node] != first {
					n++
					break
				}
			}
		}
	}
	conv.DivergedRows = &n
	fmt.Fprintf(r.log, "rows diverged: %d\n", n)
}

// listRows runs a RowLister's query at node, from its own site.
func listRows(ctx context.Context, sc engine.SQL, node, site, q string) (map[string]string, error) {
	db, err := sc.Open(ctx, node, site)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rs, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]string{}
	for rs.Next() {
		var k, v sql.NullString
		if err := rs.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k.String] = v.String
	}
	return out, rs.Err()
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

// fallbacks reports the periods a synchronous scheme ran asynchronously
// within the measure phase, for engines that can fall back by themselves.
func (r *run) fallbacks() *report.SyncFallbacks {
	fb, ok := r.cluster.(engine.SyncFallbacker)
	if !ok {
		return nil
	}
	r.phaseMu.Lock()
	from, to := r.phaseFrom, r.phaseTo
	r.phaseMu.Unlock()
	if from.IsZero() {
		return nil
	}
	periods, res, ok := fb.SyncFallbacks()
	if !ok {
		return nil
	}
	return clipFallbacks(periods, res, from, to)
}

// clipFallbacks keeps the periods that overlap [from, to] and sums the
// time of each inside it; a period without an end lasts past to.
func clipFallbacks(periods []engine.FallbackPeriod, res time.Duration, from, to time.Time) *report.SyncFallbacks {
	out := &report.SyncFallbacks{ResolutionMs: float64(res) / 1e6}
	var async time.Duration
	rel := func(t time.Time) float64 { return math.Round(t.Sub(from).Seconds()*1000) / 1000 }
	for _, p := range periods {
		end := p.End
		if end.IsZero() || end.After(to) {
			end = to
		}
		start := p.Start
		if start.Before(from) {
			start = from
		}
		if !end.After(start) {
			continue // wholly outside the phase
		}
		async += end.Sub(start)
		fp := report.FallbackPeriod{Node: p.Node, StartS: rel(p.Start)}
		if !p.End.IsZero() && !p.End.After(to) {
			e := rel(p.End)
			fp.EndS = &e
		}
		out.Periods = append(out.Periods, fp)
	}
	out.Count = len(out.Periods)
	out.AsyncS = math.Round(async.Seconds()*1000) / 1000
	if span := to.Sub(from); span > 0 {
		out.AsyncFraction = math.Round(float64(async)/float64(span)*1e4) / 1e4
	}
	return out
}

// ackWriters is how many journal writers a measurement may use: each
// measurement journals under writers from ackWriterBase on.
const ackWriters = 100000

func (r *run) ackWriterBase() int { return r.measured * ackWriters }

// maxLostKeys is how many lost keys a node's verification names.
const maxLostKeys = 20

// VerifyPlan says what [run] verify does for a run of s on eng, for
// `replab validate` and the run's log: every acknowledged commit looked
// for at every node (engines with SQL, whose writing transactions journal
// their keys, and key-value engines, whose puts do), or why not; "" when
// verification is off.
func VerifyPlan(s *spec.Spec, eng engine.Engine) string {
	if eng == nil || !s.VerifyOn() {
		return ""
	}
	d := engine.DialectOf(eng)
	if _, err := enginekit.AckInsertSQL(d); err == nil {
		return "every acknowledged commit is looked for at every node after the run"
	}
	if d == engine.KV {
		return "every acknowledged put is looked for at every node after the run"
	}
	return fmt.Sprintf("acknowledged commits: does not apply to engine %s, through which replab only reads (pages): there are no commits to look for", eng.Kind())
}

// kvJournal is a new measurement's journal of key-value puts, for the
// workload's clients (workload.ConnectEnv.Journal): nil unless
// verification is on and the cluster can read the journal back.
func (r *run) kvJournal() *workload.OpAcks {
	if _, ok := r.cluster.(engine.KVAcks); !ok || !r.s.VerifyOn() {
		return nil
	}
	return workload.NewOpAcks(r.s.Run.Users, r.ackWriterBase())
}

// journalReader reads the journal at one node, from the node's own site.
type journalReader func(ctx context.Context, n engine.Node) (map[enginekit.AckKey]bool, error)

// journal is this measurement's journal: what became of each journalled
// transaction (acknowledged or unknown), and how to read the journal at a
// node; read is nil, with the reason, when there is nothing to verify.
func (r *run) acks() (acked, unknown map[enginekit.AckKey]bool, read journalReader, why string) {
	base := r.ackWriterBase()
	acked, unknown = map[enginekit.AckKey]bool{}, map[enginekit.AckKey]bool{}
	add := func(user int, a, u []int64) {
		for _, s := range a {
			acked[enginekit.AckKey{Writer: base + user, Seq: s}] = true
		}
		for _, s := range u {
			unknown[enginekit.AckKey{Writer: base + user, Seq: s}] = true
		}
	}
	if sc, ok := r.cluster.(engine.SQL); ok {
		if r.res == nil || r.res.Acks == nil {
			return nil, nil, nil, ""
		}
		for u, j := range r.res.Acks {
			add(u, j.Acked, j.Unknown)
		}
		return acked, unknown, func(ctx context.Context, n engine.Node) (map[enginekit.AckKey]bool, error) {
			db, err := sc.Open(ctx, n.Name, n.Site)
			if err != nil {
				return nil, err
			}
			defer db.Close()
			return enginekit.ReadAcks(ctx, db)
		}, ""
	}
	kj, ok := r.cluster.(engine.KVAcks)
	if !ok {
		return nil, nil, nil, VerifyPlan(r.s, r.eng)
	}
	if !r.opAcks.Used() {
		return nil, nil, nil, fmt.Sprintf("acknowledged puts are NOT verified: workload %s does not journal its puts", r.wl.Name())
	}
	r.opAcks.Outcomes(add)
	return acked, unknown, func(ctx context.Context, n engine.Node) (map[enginekit.AckKey]bool, error) {
		present := map[enginekit.AckKey]bool{}
		err := kj.AckKeys(ctx, n.Name, func(writer int, seq int64) {
			present[enginekit.AckKey{Writer: writer, Seq: seq}] = true
		})
		return present, err
	}, ""
}

// checkAcks looks for every acknowledged commit of this measurement at
// every node holding a full copy, once the cluster flows again. A loss is
// a result, said loudly, not an error.
func (r *run) checkAcks(ctx context.Context, stopped time.Time) *report.Verification {
	if !r.s.VerifyOn() || ctx.Err() != nil {
		return nil
	}
	acked, unknown, read, why := r.acks()
	if read == nil {
		if why != "" {
			fmt.Fprintf(r.log, "verify: %s\n", why)
		}
		return nil
	}
	v := &report.Verification{Nodes: map[string]*report.NodeVerification{}}
	missing := map[string][]enginekit.AckKey{} // acknowledged commits missing, by node
	base := r.ackWriterBase()
	v.Acked, v.Unknown = int64(len(acked)), int64(len(unknown))
	r.found = nil
	fmt.Fprintf(r.log, "verifying: %d acknowledged commits at every node\n", v.Acked)
	wctx, cancel := context.WithTimeout(ctx, r.catchUpTimeout())
	defer cancel()
	if err := r.cluster.WaitFlowing(wctx); err != nil {
		v.Error = fmt.Sprintf("the cluster was not flowing within %s: %v", r.catchUpTimeout(), err)
		// Not verified; but which commits are anywhere (two primaries
		// that never converge each hold their own) is still what the HA
		// measures need: read what every readable node holds.
		if _, ok := r.cluster.(engine.RoleWatcher); ok {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			for _, n := range r.nodes {
				present, err := read(rctx, n)
				if err != nil {
					fmt.Fprintf(r.log, "journal at %s not readable: %v\n", n.Name, err)
					if v.Skipped == nil {
						v.Skipped = map[string]string{}
					}
					v.Skipped[n.Name] = fmt.Sprintf("not readable after the run: %v", err)
					continue
				}
				r.noteFound(present)
			}
		}
		return v
	}
	for _, n := range r.nodes {
		if sn := r.s.Node(n.Name); sn != nil && len(sn.Tables) > 0 {
			if v.Skipped == nil {
				v.Skipped = map[string]string{}
			}
			v.Skipped[n.Name] = "a partial copy (table filters): it does not hold the journal"
			continue
		}
		present, err := read(wctx, n)
		if err != nil {
			// A node down at the end (killed and failed over from) cannot
			// be checked: said, not hidden.
			if v.Skipped == nil {
				v.Skipped = map[string]string{}
			}
			v.Skipped[n.Name] = fmt.Sprintf("not readable after the run: %v", err)
			continue
		}
		r.noteFound(present)
		nv, lost := compareAcks(present, base, acked, unknown)
		missing[n.Name] = lost
		v.Nodes[n.Name] = nv
		v.Lost = max(v.Lost, nv.Lost)
		if nv.Lost > 0 {
			fmt.Fprintf(r.log, "warning: %d of %d acknowledged commits are missing at %s (first: %s)\n", nv.Lost, v.Acked, n.Name, strings.Join(nv.LostKeys, ", "))
		}
	}
	v.LostEverywhere = heldElsewhere(v.Nodes, missing, r.found)
	v.CheckedAfterS = math.Round(time.Since(stopped).Seconds()*1000) / 1000
	if len(v.Nodes) == 0 {
		v.Error = "no node could be read"
	}
	return v
}

// heldElsewhere sets each node's HeldElsewhere, from the acknowledged
// commits missing there and the journal keys found at any node checked,
// and returns how many acknowledged commits no node checked holds.
func heldElsewhere(nodes map[string]*report.NodeVerification, missing map[string][]enginekit.AckKey, found map[enginekit.AckKey]bool) int64 {
	nowhere := map[enginekit.AckKey]bool{}
	for n, keys := range missing {
		nv := nodes[n]
		for _, k := range keys {
			if found[k] {
				nv.HeldElsewhere++
			} else {
				nowhere[k] = true
			}
		}
	}
	return int64(len(nowhere))
}

// noteFound adds the journal keys one node holds to those found anywhere
// (r.found): where the writes of a losing primary survived, for the HA
// measures.
func (r *run) noteFound(present map[enginekit.AckKey]bool) {
	if r.found == nil {
		r.found = map[enginekit.AckKey]bool{}
	}
	for k := range present {
		r.found[k] = true
	}
}

// compareAcks compares the journal keys present at one node with this
// measurement's (writers from base on): acknowledged ones missing are
// lost (and returned, in order); present ones neither acknowledged nor
// unknown are unexpected.
func compareAcks(present map[enginekit.AckKey]bool, base int, acked, unknown map[enginekit.AckKey]bool) (*report.NodeVerification, []enginekit.AckKey) {
	nv := &report.NodeVerification{}
	for k := range present {
		if k.Writer < base || k.Writer >= base+ackWriters {
			continue // another measurement's
		}
		nv.Present++
		switch {
		case acked[k]:
		case unknown[k]:
			nv.UnacknowledgedButPresent++
		default:
			nv.Unexpected++
		}
	}
	var lost []enginekit.AckKey
	for k := range acked {
		if !present[k] {
			lost = append(lost, k)
		}
	}
	nv.Lost = int64(len(lost))
	slices.SortFunc(lost, func(a, b enginekit.AckKey) int {
		if a.Writer != b.Writer {
			return a.Writer - b.Writer
		}
		return int(a.Seq - b.Seq)
	})
	for _, k := range lost[:min(len(lost), maxLostKeys)] {
		nv.LostKeys = append(nv.LostKeys, fmt.Sprintf("%d/%d", k.Writer-base, k.Seq))
	}
	return nv, lost
}

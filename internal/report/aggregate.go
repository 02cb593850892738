package report

// The aggregate of a repeated run: what its summary.json says.

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"replab/internal/fault"
	"replab/internal/stats"
)

// Aggregate summarises repetitions of one run (dirs[i] names sums[i]'s
// directory). Every figure of the result is one of:
//
//   - a mean over the complete repetitions, with its confidence interval at
//     level in CI under the figure's summary.json path
//     ("commit_latency_ms.p99_9", "links.a->b.bytes",
//     "roles.p1.backend.cpu_s");
//   - a sum over the complete repetitions, for counts of events
//     (transactions, errors, retries, tracked, …: see foldRules);
//   - configuration, the same in every repetition (users, a link's rate);
//   - a tally of what the repetitions said, labelled ("keeping up (3 of 3
//     repetitions)") for verdicts and other words that cannot be averaged.
//
// Nothing is one repetition's value alone, except the identity of the run
// (name, spec, engine, environment, initial load), which the repetitions
// share, and Started, the first repetition's start. docs/metrics.md
// lists every figure.
func Aggregate(sums []*Summary, dirs []string, level float64) *Summary {
	agg := &Summary{Kind: "repetitions", Complete: true}
	if len(sums) == 0 {
		agg.Complete, agg.StopReason = false, "no repetitions"
		return agg
	}
	first := sums[0]
	if first == nil {
		first = &Summary{}
	}
	agg.Name, agg.Started, agg.SpecFile = first.Name, first.Started, first.SpecFile
	agg.Engine, agg.Scheme, agg.Workload = first.Engine, first.Scheme, first.Workload
	agg.Mode, agg.Users, agg.TargetRate = first.Mode, first.Users, first.TargetRate
	agg.Load, agg.SetupS, agg.Environment = first.Load, first.SetupS, first.Environment

	var complete []*Summary
	var completeDirs []string
	for i, s := range sums {
		if s == nil { // a repetition that left no summary counts as incomplete
			s = &Summary{StopReason: "no summary"}
		}
		dir := fmt.Sprintf("rep-%02d", i+1)
		if i < len(dirs) {
			dir = dirs[i]
		}
		agg.Repetitions = append(agg.Repetitions, repetitionOf(dir, s))
		if !s.Complete {
			if agg.Complete {
				agg.Complete, agg.StopReason = false, "repetition "+dir+": "+s.StopReason
			}
			continue
		}
		complete = append(complete, s)
		completeDirs = append(completeDirs, dir)
	}
	agg.Consistency = foldConsistency(sums, dirs)
	if len(complete) == 0 {
		return agg
	}

	f := folder{level: level, ci: map[string]stats.CI{}}
	vals := make([]reflect.Value, len(complete))
	for i, s := range complete {
		vals[i] = reflect.ValueOf(s).Elem()
	}
	f.fold(nil, reflect.ValueOf(agg).Elem(), vals)
	agg.Faults = f.foldFaults(complete)
	// HA figures over every occurrence of every repetition: a fault
	// repeated within runs and across them is one sample.
	var occurrences []fault.Summary
	for _, s := range complete {
		occurrences = append(occurrences, s.Faults...)
	}
	agg.HA = fault.FoldHA(occurrences)
	agg.CI = f.ci
	rateCIs(agg.CI, complete, level)
	if ci, ok := agg.CI["tpm"]; ok {
		agg.TPMCI = &ci
	}
	agg.Verdicts = verdictTally(complete)
	if agg.Monitor != nil {
		for i, s := range complete {
			if s.Monitor != nil {
				for _, w := range s.Monitor.Warnings {
					agg.Monitor.Warnings = append(agg.Monitor.Warnings, completeDirs[i]+": "+w)
				}
			}
		}
	}
	return agg
}

// The CI keys of the rates rateCIs adds: per 10,000 transactions checked
// (anomalies of every class, lost updates) or measured (conflicts the
// replication counted).
const (
	ciAnomaliesPer10k = "consistency.anomalies_per_10k"
	ciLostPer10k      = "consistency.lost_updates_per_10k"
	ciConflictsPer10k = "replication_conflicts.per_10k"
)

// rateCIs adds the CIs of rates whose parts the aggregate sums: the
// anomalies per 10,000 transactions checked and the conflicts per 10,000
// transactions, one rate per repetition. (The sums give the pooled rate;
// its spread between repetitions is only in these.)
func rateCIs(ci map[string]stats.CI, complete []*Summary, level float64) {
	var anomalies, lost, conflicts []float64
	for _, s := range complete {
		if c := s.Consistency; c != nil && c.Error == "" && c.TransactionsChecked > 0 {
			n := float64(c.TransactionsChecked)
			anomalies = append(anomalies, float64(c.anomalyCount())*1e4/n)
			lost = append(lost, float64(c.Anomalies["lost-update"])*1e4/n)
		}
		if rc := s.ReplicationConflicts; rc != nil && rc.Counted != "" && rc.Error == "" && s.Transactions > 0 {
			conflicts = append(conflicts, float64(rc.Count)*1e4/float64(s.Transactions))
		}
	}
	for k, xs := range map[string][]float64{ciAnomaliesPer10k: anomalies, ciLostPer10k: lost, ciConflictsPer10k: conflicts} {
		if len(xs) >= 2 {
			ci[k] = stats.MeanCI(xs, level)
		}
	}
}

// repetitionOf is a repetition's line in the aggregate.
func repetitionOf(dir string, s *Summary) Repetition {
	rep := Repetition{Dir: dir, Complete: s.Complete, TPM: s.TPM, CommitP99Ms: s.CommitLatency.P99,
		Transactions: s.Transactions, LagP50Ms: map[string]float64{}}
	for n, r := range s.Replicas {
		if r == nil {
			continue
		}
		rep.LagP50Ms[n] = r.LagMs.P50
		rep.LagSampleEvery = r.SampleEvery
	}
	if len(s.Verdicts) > 0 {
		rep.Verdicts = s.Verdicts
	}
	if c := s.Consistency; c != nil && c.Error == "" {
		n := c.anomalyCount()
		rep.Anomalies = &n
	}
	return rep
}

// verdictTally labels each replica's verdicts by how many complete
// repetitions gave them, most frequent first: "keeping up (3 of 3
// repetitions)", "cpu-bound (2 of 3 repetitions), keeping up (1 of 3
// repetitions)". A verdict counts by its kind (the words before its
// parenthesis); each repetition's full verdict is in Repetitions.
func verdictTally(complete []*Summary) map[string]string {
	byReplica := map[string][]string{}
	for _, s := range complete {
		for n, v := range s.Verdicts {
			kind, _, _ := strings.Cut(v, " (")
			byReplica[n] = append(byReplica[n], kind)
		}
	}
	if len(byReplica) == 0 {
		return nil
	}
	out := map[string]string{}
	for n, kinds := range byReplica {
		out[n] = tally(kinds, len(complete), true)
	}
	return out
}

// tally says how often each word occurs among n repetitions: the word
// alone when every repetition said it and label is false, else "w (k of
// n repetitions)" per word, most frequent first. Empty words do not
// count (a steady run has no reason).
func tally(words []string, n int, label bool) string {
	count := map[string]int{}
	for _, w := range words {
		if w != "" {
			count[w]++
		}
	}
	if len(count) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(count))
	if len(keys) == 1 && count[keys[0]] == n && !label {
		return keys[0]
	}
	sort.SliceStable(keys, func(i, j int) bool { return count[keys[i]] > count[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%d of %d repetitions)", k, count[k], n)
	}
	return strings.Join(parts, ", ")
}

// how is what becomes of a figure of the repetitions in the aggregate.
type how int

const (
	mean       how = iota // mean over the repetitions, its CI in Summary.CI
	sum                   // a count of events: summed over the repetitions
	same                  // configuration: its value, or a mean with a CI if it differed
	sameOrZero            // configuration whose difference is shown elsewhere: 0 if it differed
	anyTrue               // a flag: true if it was in any repetition (bools default to every one)
	zeroFill              // a map whose missing entries count as zeros (a role that did not run)
	nonZero               // 0 where it does not apply (no slow pages, no period): mean over the repetitions where it is not 0
	skip                  // set by Aggregate itself
)

// foldRules says how each figure folds, by summary.json path ("*" is any
// map key). Numbers without a rule are means; words without one are
// tallied (see tally); flags are true when true in every repetition.
var foldRules = []struct {
	path string
	how  how
}{
	// Identity and the aggregate's own fields.
	{"kind", skip}, {"name", skip}, {"complete", skip}, {"stop_reason", skip}, {"started", skip},
	{"spec_file", skip}, {"engine", skip}, {"scheme", skip}, {"workload", skip},
	{"mode", skip}, {"users", skip}, {"target_rate_per_s", skip},
	{"tpm_ci", skip}, {"ci", skip}, {"repetitions", skip}, {"repetitions_needed", skip},
	{"load", skip}, {"setup_s", skip}, {"environment", skip},
	{"verdicts", skip}, {"monitor.warnings", skip},
	{"steady.slope_low_pct_per_min", skip}, {"steady.slope_high_pct_per_min", skip},
	{"faults", skip}, {"faults.*.fault", skip}, // foldFaults
	{"consistency", skip},               // foldConsistency
	{"ha", skip}, {"faults.*.ha", skip}, // fault.FoldHA over every occurrence

	// Counts of events, and time measured. (A count behind a summary, such
	// as a percentile summary's count or the monitors' samples, is a mean
	// like the figures it stands beside.)
	{"measure_s", sum}, {"transactions", sum}, {"transactions_done", sum}, {"transactions_target", same}, {"rows_changed", sum}, {"errors", sum}, {"retries", sum},
	{"conflicts", sum}, {"skipped", sum}, {"types.*.errors.*", sum}, {"types.*.retries", sum}, {"types.*.conflicts", sum},
	{"replicas.*.not_visible_at_end", sum}, {"replicas.*.tracked", sum}, {"replicas.*.polls", sum},
	{"replicas.*.window_hits", sum}, {"replicas.*.visible_before_watch", sum}, {"replicas.*.unpositioned", sum},
	{"verification.acked", sum}, {"verification.unknown", sum}, {"verification.lost", sum},
	{"verification.lost_everywhere", sum},
	{"verification.nodes.*.present", sum}, {"verification.nodes.*.lost", sum}, {"verification.nodes.*.held_elsewhere", sum},
	{"verification.nodes.*.unacknowledged_but_present", sum}, {"verification.nodes.*.unexpected", sum},
	{"verification.checked_after_s", skip}, {"verification.nodes.*.lost_keys", skip},
	{"clients.*.transactions", sum}, {"clients.*.errors", sum}, {"clients.*.users", same},
	{"clients.*.stale_reads.read_txns", sum}, {"clients.*.stale_reads.reads", sum}, {"clients.*.stale_reads.after_write", sum},
	{"clients.*.stale_reads.stale", sum}, {"clients.*.stale_reads.stale_txns", sum}, {"clients.*.stale_reads.own_reads", sum},
	{"clients.*.stale_reads.ryw_violations", sum}, {"clients.*.stale_reads.monotonic_reads", sum}, {"clients.*.stale_reads.monotonic_violations", sum},
	{"stale_reads.nodes.*.read_txns", sum}, {"stale_reads.nodes.*.reads", sum}, {"stale_reads.nodes.*.after_write", sum},
	{"stale_reads.nodes.*.stale", sum}, {"stale_reads.nodes.*.stale_txns", sum}, {"stale_reads.nodes.*.own_reads", sum},
	{"stale_reads.nodes.*.ryw_violations", sum}, {"stale_reads.nodes.*.monotonic_reads", sum},
	{"stale_reads.nodes.*.monotonic_violations", sum}, {"stale_reads.unlisted", sum}, {"stale_reads.lag_sample_every", sameOrZero},
	{"stale_reads.nodes.*.predicted.lag_samples", sum}, {"stale_reads.nodes.*.predicted.gaps_from_commit", sum},
	{"stale_reads.nodes.*.predicted.safe_share", same},
	{"pages.pages", sum}, {"pages.slow.pages", sum}, {"pages.slow.slow_pages", sum}, {"pages.slow.retransmits", sum},

	// Configuration.
	{"links.*.rate_bps", same}, {"links.*.delay_ms", same}, {"links.*.loss_configured_pct", same}, {"monitor.interval_s", same},
	{"replicas.*.sample_budget_per_s", same},
	{"pages.slow.period_pages", nonZero}, {"pages.slow.period_s", nonZero}, {"pages.slow.period_cv", nonZero},
	{"pages.slow.slow_mean_ms", nonZero},
	{"pages.page_size_bytes", same}, {"pages.connections", same}, {"pages.users", same}, {"pages.slow.threshold_factor", same},
	{"replicas.*.sample_every", sameOrZero}, // Repetitions[].LagSampleEvery has each

	{"replication.*.lag_grows", anyTrue},
	{"machine_bound", anyTrue}, {"machine.bound", anyTrue}, {"machine.cores", same},
	{"roles", zeroFill}, {"roles.*", zeroFill},
}

func ruleFor(path []string) how {
	for _, r := range foldRules {
		p := strings.Split(r.path, ".")
		if len(p) != len(path) {
			continue
		}
		ok := true
		for i := range p {
			if p[i] != "*" && p[i] != path[i] {
				ok = false
				break
			}
		}
		if ok {
			return r.how
		}
	}
	return mean
}

// folder folds the complete repetitions' summaries into the aggregate's,
// field by field, so that a figure added to Summary (or to the monitors'
// summaries it holds) becomes a mean with a CI without code here.
type folder struct {
	level float64
	ci    map[string]stats.CI
}

var timeType = reflect.TypeFor[time.Time]()

// fold sets dst from vals, the same field in each repetition that has it.
func (f *folder) fold(path []string, dst reflect.Value, vals []reflect.Value) {
	h := ruleFor(path)
	if h == skip || len(vals) == 0 {
		return
	}
	switch dst.Kind() {
	case reflect.Pointer:
		var elems []reflect.Value
		for _, v := range vals {
			if !v.IsNil() {
				elems = append(elems, v.Elem())
			}
		}
		if len(elems) > 0 {
			dst.Set(reflect.New(dst.Type().Elem()))
			f.fold(path, dst.Elem(), elems)
		}
	case reflect.Struct:
		if dst.Type() == timeType {
			dst.Set(vals[0])
			return
		}
		t := dst.Type()
		for i := range t.NumField() {
			name := jsonName(t.Field(i))
			if name == "" {
				continue
			}
			fv := make([]reflect.Value, len(vals))
			for j, v := range vals {
				fv[j] = v.Field(i)
			}
			f.fold(append(slices.Clip(path), name), dst.Field(i), fv)
		}
	case reflect.Map:
		f.foldMap(path, dst, vals, h == zeroFill)
	case reflect.Bool:
		all, some := true, false
		for _, v := range vals {
			all = all && v.Bool()
			some = some || v.Bool()
		}
		dst.SetBool(all || (h == anyTrue && some))
	case reflect.String:
		words := make([]string, len(vals))
		for i, v := range vals {
			words[i] = v.String()
		}
		dst.SetString(tally(words, len(vals), false))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		f.foldNumber(path, dst, vals, h)
	default:
		// Slices: Aggregate sets the one there is (the monitors' warnings).
	}
}

// foldFaults folds the repetitions' faults per fault index: each figure
// of fault i (at_s, heal_s, the windows', the lag peaks) a mean over the
// repetitions that have it, with its CI under "faults.i.…" — so
// recover_s is the mean over the repetitions that recovered, and its
// CI's n says how many did; what and error are tallied.
func (f *folder) foldFaults(complete []*Summary) []fault.Summary {
	byFault := map[int][]reflect.Value{}
	for _, s := range complete {
		seen := map[int]bool{}
		for i := range s.Faults {
			k := s.Faults[i].Fault
			if seen[k] {
				continue // one per repetition: the contract has none twice
			}
			seen[k] = true
			byFault[k] = append(byFault[k], reflect.ValueOf(&s.Faults[i]).Elem())
		}
	}
	var out []fault.Summary
	for _, k := range slices.Sorted(maps.Keys(byFault)) {
		fs := fault.Summary{Fault: k}
		f.fold([]string{"faults", strconv.Itoa(k)}, reflect.ValueOf(&fs).Elem(), byFault[k])
		out = append(out, fs)
	}
	return out
}

// foldMap folds a map key by key over the union of the repetitions' keys.
// A repetition without the map at all (e.g. from before the monitors)
// says nothing about its entries.
func (f *folder) foldMap(path []string, dst reflect.Value, vals []reflect.Value, zeros bool) {
	var present []reflect.Value
	keys := map[string]reflect.Value{}
	for _, v := range vals {
		if v.IsNil() {
			continue
		}
		present = append(present, v)
		for _, k := range v.MapKeys() {
			keys[k.String()] = k
		}
	}
	if len(present) == 0 {
		return
	}
	elem := dst.Type().Elem()
	out := reflect.MakeMapWithSize(dst.Type(), len(keys))
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		var ev []reflect.Value
		for _, m := range present {
			e := m.MapIndex(keys[name])
			if !e.IsValid() {
				if !zeros {
					continue
				}
				e = reflect.Zero(elem)
			}
			ev = append(ev, e)
		}
		nv := reflect.New(elem).Elem()
		f.fold(append(slices.Clip(path), name), nv, ev)
		out.SetMapIndex(keys[name], nv)
	}
	dst.Set(out)
}

func (f *folder) foldNumber(path []string, dst reflect.Value, vals []reflect.Value, h how) {
	xs := make([]float64, len(vals))
	for i, v := range vals {
		switch {
		case v.CanInt():
			xs[i] = float64(v.Int())
		case v.CanUint():
			xs[i] = float64(v.Uint())
		default:
			xs[i] = v.Float()
		}
	}
	switch h {
	case nonZero:
		xs = slices.DeleteFunc(xs, func(x float64) bool { return x == 0 })
		if len(xs) == 0 {
			setNumber(dst, 0)
			return
		}
	case sum:
		var t float64
		for _, x := range xs {
			t += x
		}
		setNumber(dst, t)
		return
	case same, sameOrZero:
		if !slices.ContainsFunc(xs, func(x float64) bool { return x != xs[0] }) {
			setNumber(dst, xs[0])
			return
		}
		if h == sameOrZero {
			setNumber(dst, 0)
			return
		}
	}
	ci := stats.MeanCI(xs, f.level)
	f.ci[strings.Join(path, ".")] = ci
	setNumber(dst, ci.Mean)
}

// setNumber stores v, rounded to the nearest whole number for integer
// fields (a mean count of 6888.3 transactions is stored as 6888; its CI
// keeps the fraction).
func setNumber(dst reflect.Value, v float64) {
	switch {
	case dst.CanInt():
		dst.SetInt(int64(math.Round(v)))
	case dst.CanUint():
		dst.SetUint(uint64(math.Round(max(v, 0))))
	default:
		dst.SetFloat(v)
	}
}

// jsonName is a struct field's name in summary.json ("" when it has none).
func jsonName(sf reflect.StructField) string {
	if !sf.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return sf.Name
	}
	return name
}

package check

import "slices"

// The consistency models, and which anomaly rules out which model: the one
// table the verdict is computed from (docs/consistency.md prints it).
//
// The lattice is the one replab reports on, strongest first. It follows
// Adya's levels as Elle names them, for histories of single items (no
// predicates): strict serializability adds real time to serializability;
// snapshot isolation forbids G-single and lost updates but allows write
// skew (G2-item); repeatable read (PL-2.99, item) forbids every item cycle
// with an anti-dependency but nothing about a snapshot; read committed
// forbids G1; read uncommitted forbids G0. Snapshot isolation and
// repeatable read are incomparable in Adya's terms (each allows something
// the other forbids), so the lattice is read as the list the issue gives,
// and the verdict reports every model by name beside the two headline
// names: the strongest satisfied and the weakest violated.

// Models is the lattice, strongest first.
var Models = []string{
	StrictSerializable,
	"serializable",
	"snapshot-isolation",
	"repeatable-read",
	"read-committed",
	"read-uncommitted",
}

// StrictSerializable is the strongest model: for transactions of one
// operation on one key it is linearizability.
const StrictSerializable = "strict-serializable"

// SessionModels are the models strengthened by process order ("strong
// session" variants: each process sees its own earlier transactions as
// committed before its later ones). A *-process cycle rules them out.
var SessionModels = []string{
	"strong-session-serializable",
	"strong-session-snapshot-isolation",
	"strong-session-repeatable-read",
	"strong-session-read-committed",
	"strong-session-read-uncommitted",
}

// SessionGuarantees are Terry et al.'s per-process guarantees, reported
// beside the models (their anomaly classes carry the same names).
var SessionGuarantees = []string{
	ReadYourWrites,
	MonotonicReads,
	MonotonicWrites,
	WritesFollowReads,
}

// Anomaly classes.
const (
	G0           = "G0"
	G1a          = "G1a"
	G1b          = "G1b"
	G1c          = "G1c"
	GSingle      = "G-single"
	GNonadjacent = "G-nonadjacent"
	G2Item       = "G2-item"
	// Cycle is a cycle the search ran out of budget to classify: it rules
	// out what every cycle of its level rules out.
	Cycle = "cycle"

	DirtyUpdate       = "dirty-update"
	LostUpdate        = "lost-update"
	Internal          = "internal"
	DuplicateElements = "duplicate-elements"
	IncompatibleOrder = "incompatible-order"
	GarbageRead       = "garbage-read"

	ReadYourWrites    = "read-your-writes"
	MonotonicReads    = "monotonic-reads"
	MonotonicWrites   = "monotonic-writes"
	WritesFollowReads = "writes-follow-reads"
)

// Suffixes of the cycle classes that need process or real-time order.
const (
	ProcessSuffix  = "-process"
	RealtimeSuffix = "-realtime"
)

var (
	ssAll = SessionModels
	ssRC  = SessionModels[:4]
	ssSI  = SessionModels[:3]
	ssRR  = []string{"strong-session-serializable", "strong-session-repeatable-read"}
	all   = Models
	rc    = Models[:5]
	si    = Models[:4]
	rr    = []string{StrictSerializable, "serializable", "repeatable-read"}
	ss    = []string{StrictSerializable}
)

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Violates is the table: anomaly class → the models it rules out. A class
// not in it (the session guarantees) rules out no model.
var Violates = map[string][]string{
	G0:           join(all, ssAll),
	G1a:          join(rc, ssRC),
	G1b:          join(rc, ssRC),
	G1c:          join(rc, ssRC),
	GSingle:      join(si, ssSI),
	GNonadjacent: join(si, ssSI),
	G2Item:       join(rr, ssRR),
	Cycle:        join(rr, ssRR),

	G0 + ProcessSuffix:           join(ss, ssAll),
	G1c + ProcessSuffix:          join(ss, ssRC),
	GSingle + ProcessSuffix:      join(ss, ssSI),
	GNonadjacent + ProcessSuffix: join(ss, ssSI),
	G2Item + ProcessSuffix:       join(ss, ssRR),
	Cycle + ProcessSuffix:        join(ss, ssRR),

	G0 + RealtimeSuffix:           ss,
	G1c + RealtimeSuffix:          ss,
	GSingle + RealtimeSuffix:      ss,
	GNonadjacent + RealtimeSuffix: ss,
	G2Item + RealtimeSuffix:       ss,
	Cycle + RealtimeSuffix:        ss,

	LostUpdate:        join(si, ssSI),
	DirtyUpdate:       join(all, ssAll),
	Internal:          join(all, ssAll),
	DuplicateElements: join(all, ssAll),
	IncompatibleOrder: join(all, ssAll),
	GarbageRead:       join(all, ssAll),
}

// classOrder is the order classes are listed in: cycles by severity, then
// the others, then the session guarantees.
var classOrder = []string{
	G0, G0 + ProcessSuffix, G0 + RealtimeSuffix,
	G1a, G1b, G1c, G1c + ProcessSuffix, G1c + RealtimeSuffix,
	GSingle, GSingle + ProcessSuffix, GSingle + RealtimeSuffix,
	GNonadjacent, GNonadjacent + ProcessSuffix, GNonadjacent + RealtimeSuffix,
	G2Item, G2Item + ProcessSuffix, G2Item + RealtimeSuffix,
	Cycle, Cycle + ProcessSuffix, Cycle + RealtimeSuffix,
	LostUpdate, DirtyUpdate, Internal, DuplicateElements, IncompatibleOrder, GarbageRead,
	ReadYourWrites, MonotonicReads, MonotonicWrites, WritesFollowReads,
}

// classRank orders class names for output (unknown names last).
func classRank(c string) int {
	if i := slices.Index(classOrder, c); i >= 0 {
		return i
	}
	return len(classOrder)
}

// verdict fills the models and guarantees from the anomaly counts.
func (r *Result) verdict() {
	violated := map[string]bool{}
	for class, n := range r.Anomalies {
		if n == 0 {
			continue
		}
		for _, m := range Violates[class] {
			violated[m] = true
		}
	}
	r.ModelsSatisfied, r.ModelsViolated = []string{}, []string{}
	for _, m := range join(Models, SessionModels) {
		if violated[m] {
			r.ModelsViolated = append(r.ModelsViolated, m)
		} else {
			r.ModelsSatisfied = append(r.ModelsSatisfied, m)
		}
	}
	r.StrongestSatisfied, r.WeakestViolated = "none", "none"
	for _, m := range Models {
		if !violated[m] {
			r.StrongestSatisfied = m
			break
		}
	}
	for i := len(Models) - 1; i >= 0; i-- {
		if violated[Models[i]] {
			r.WeakestViolated = Models[i]
			break
		}
	}
	r.SessionGuaranteesSatisfied, r.SessionGuaranteesViolated = []string{}, []string{}
	for _, g := range SessionGuarantees {
		if r.Anomalies[g] > 0 {
			r.SessionGuaranteesViolated = append(r.SessionGuaranteesViolated, g)
		} else {
			r.SessionGuaranteesSatisfied = append(r.SessionGuaranteesSatisfied, g)
		}
	}
}

// Violated reports whether the verdict rules out model m (a model or a
// session guarantee).
func (r *Result) Violated(m string) bool {
	return slices.Contains(r.ModelsViolated, m) || slices.Contains(r.SessionGuaranteesViolated, m)
}

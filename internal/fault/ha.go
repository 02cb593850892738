package fault

import (
	"math"
	"slices"
	"sort"

	"replab/internal/stats"
)

// What a fault did to an HA cluster (docs/failover.md): who was primary
// before and after, how long until another node took writes as the
// servers, the manager and the clients saw it, what acknowledged commits
// were lost, whether two nodes took writes at once, and whether the old
// primary came back as a standby by itself. Pure: the runner hands in the
// nodes' roles over time and every acknowledged commit, all on the
// measure phase's axis.

// Roles a node holds (engine.Role*), as the role history says them.
const (
	RolePrimary   = "primary"
	RoleStreaming = "streaming"
	RoleReplica   = "replica"
	RoleDown      = "down"

	FromServer  = "server"
	FromManager = "manager"
)

// RoleSpan is one period a node held a role, as its server or its
// manager said (Source), on the measure phase's axis; ToS is +Inf for one
// that had not ended.
type RoleSpan struct {
	Node, Source, Role string
	FromS, ToS         float64
}

// Ack is one acknowledged commit: the user that made it, the node that
// acknowledged it ("" when unknown), when, and whether it was found at
// some node after the run.
type Ack struct {
	User  int
	Node  string
	S     float64
	Found bool
}

// HAInput is a run as the HA measures read it.
type HAInput struct {
	Roles []RoleSpan
	// Acks are every acknowledged commit, in each user's order.
	Acks []Ack
	// Checked: the journals were read after the run, so Found means
	// something (RPO and surviving writes are measured).
	Checked bool
	// Unread are the nodes whose journals could not be read (down at the
	// end): Found then means found at one of the others.
	Unread []string
}

// HA is a fault's effect on an HA cluster, in summary.json's faults.
type HA struct {
	// OldPrimary took writes when the fault began, as its server said;
	// "" when none did.
	OldPrimary string `json:"old_primary"`
	// NewPrimary is the first other node whose server took writes after
	// the fault, before the next fault; "" when none did.
	NewPrimary string `json:"new_primary,omitempty"`
	// PromotedS: from the fault until NewPrimary's server left recovery;
	// ElectedS: until a manager other than the old primary's said it
	// leads; ClientsS: until a client's commit was first acknowledged by
	// another node than the old primary.
	PromotedS *float64 `json:"promoted_s,omitempty"`
	ElectedS  *float64 `json:"elected_s,omitempty"`
	ClientsS  *float64 `json:"clients_s,omitempty"`
	// Lost counts the acknowledged commits found at no node after the
	// run, among those acknowledged in the fault's window for lost
	// commits (LostWindows: from BeforeS before the fault, not before the
	// previous fault, until the next fault's window begins, so that each
	// commit counts for one fault only); LostBy says which node had
	// acknowledged them. Absent when the journals were not read.
	Lost   *int64           `json:"lost,omitempty"`
	LostBy map[string]int64 `json:"lost_by,omitempty"`
	// LostUnread names the nodes that could not be read after the run:
	// Lost is then the commits found at none of the others (a commit
	// that only an unreadable node holds counts as lost).
	LostUnread []string `json:"lost_unread,omitempty"`
	// SplitBrain is present when it was measured: every commit's node was
	// known and the roles were followed. Its zeros mean none.
	SplitBrain *SplitBrain `json:"split_brain,omitempty"`
	// Rejoin is present when another node took over from OldPrimary.
	Rejoin *Rejoin `json:"rejoin,omitempty"`
}

// SplitBrain is the time two nodes took writes at once, and what the
// losing side accepted, from the fault until the next one.
type SplitBrain struct {
	// AckedOverlapMs is the time during which commits were acknowledged
	// by two nodes or more: each node takes writes from the first to the
	// last commit of each run of one client's commits there.
	AckedOverlapMs float64 `json:"acked_overlap_ms"`
	// ServersOverlapMs is the time during which two servers or more said
	// they were out of recovery.
	ServersOverlapMs float64 `json:"servers_overlap_ms"`
	// Winner is the primary at the end: the last node whose server took
	// writes in the window.
	Winner string `json:"winner,omitempty"`
	// LosingSideWrites are the commits other nodes acknowledged while
	// Winner's server was already a primary: writes on a history Winner
	// does not have.
	LosingSideWrites int64 `json:"losing_side_writes"`
	// Surviving counts those found at some node after the run; absent
	// when the journals were not read.
	Surviving *int64 `json:"surviving,omitempty"`
}

// Rejoin is whether the old primary came back as a standby by itself.
type Rejoin struct {
	Node     string `json:"node"`
	Rejoined bool   `json:"rejoined"`
	// RejoinedS is from the heal (the fault, if it was not healed) until
	// its server streamed from another node; RedundantS until every node
	// was up again: one primary, every other one streaming.
	RejoinedS  *float64 `json:"rejoined_s,omitempty"`
	RedundantS *float64 `json:"redundant_s,omitempty"`
}

// AckRunGapS is the longest wait between two commits of one user at one
// node within which the node counts as taking that user's writes all
// along.
const AckRunGapS = 1.0

// OldPrimaryWithinS is how long before a fault's time the old primary's
// period may have ended: the fault took that long to do.
const OldPrimaryWithinS = 1.0

// roleAt is node's role as source said it at s; "" when unknown.
func roleAt(roles []RoleSpan, node, source string, s float64) string {
	for _, r := range roles {
		if r.Node == node && r.Source == source && r.FromS <= s && s < r.ToS {
			return r.Role
		}
	}
	return ""
}

// LostWindows gives the faults at ats (in order) their windows for lost
// commits: each from BeforeS before its fault (not before the previous
// fault, nor before floorS) until the next one's window begins, the last
// until endS. Consecutive windows tile: a commit acknowledged just
// before a fault counts for that fault, and for no other, so that the
// faults' losses add up to the run's.
func LostWindows(ats []float64, floorS, endS float64) []Interval {
	out := make([]Interval, len(ats))
	for i, at := range ats {
		out[i].FromS = math.Max(at-BeforeS, floorS)
		floorS = math.Max(floorS, at)
		if i > 0 {
			out[i-1].ToS = out[i].FromS
		}
	}
	if n := len(out); n > 0 {
		out[n-1].ToS = endS
	}
	return out
}

// Interval is [FromS, ToS) on the measure phase's axis.
type Interval struct{ FromS, ToS float64 }

// MeasureHA measures fault sp, whose window ends at nextS (the next
// fault's start, or +Inf), counting the lost commits acknowledged within
// lost (LostWindows). It returns nil without a role history.
func MeasureHA(sp Span, lost Interval, nextS float64, in HAInput) *HA {
	if len(in.Roles) == 0 {
		return nil
	}
	nodes := roleNodes(in.Roles)
	h := &HA{}
	// The fault's time is when it was done (a kill, once the processes
	// were gone): the primary it took away may have stopped saying so
	// just before. The old primary is the one whose period ended last,
	// no earlier than OldPrimaryWithinS before the fault.
	lastEnd := sp.AtS - OldPrimaryWithinS
	for _, r := range in.Roles {
		if r.Source == FromServer && r.Role == RolePrimary && r.FromS < sp.AtS && r.ToS >= lastEnd {
			h.OldPrimary, lastEnd = r.Node, r.ToS
		}
	}
	rel := func(s float64) *float64 { v := round3(s - sp.AtS); return &v }
	firstStart := func(source string) (string, float64) {
		node, at := "", math.Inf(1)
		for _, r := range in.Roles {
			if r.Source == source && r.Role == RolePrimary && r.Node != h.OldPrimary && r.FromS > sp.AtS && r.FromS < nextS && r.FromS < at {
				node, at = r.Node, r.FromS
			}
		}
		return node, at
	}
	if n, at := firstStart(FromServer); n != "" {
		h.NewPrimary, h.PromotedS = n, rel(at)
	}
	if n, at := firstStart(FromManager); n != "" {
		h.ElectedS = rel(at)
		if h.NewPrimary == "" {
			h.NewPrimary = n
		}
	}
	known := len(in.Acks) > 0
	for _, a := range in.Acks {
		if a.Node == "" {
			known = false
			continue
		}
		if a.S > sp.AtS && a.S < nextS && a.Node != h.OldPrimary && (h.ClientsS == nil || a.S-sp.AtS < *h.ClientsS) {
			h.ClientsS = rel(a.S)
		}
	}
	if in.Checked {
		var n int64
		for _, a := range in.Acks {
			if a.S >= lost.FromS && a.S < lost.ToS && !a.Found {
				n++
				node := a.Node
				if node == "" {
					node = "unknown"
				}
				if h.LostBy == nil {
					h.LostBy = map[string]int64{}
				}
				h.LostBy[node]++
			}
		}
		h.Lost = &n
		if len(in.Unread) > 0 {
			h.LostUnread = slices.Sorted(slices.Values(in.Unread))
		}
	}
	if known {
		h.SplitBrain = splitBrain(sp.AtS, nextS, in)
	}
	if h.OldPrimary != "" && h.NewPrimary != "" {
		h.Rejoin = rejoin(sp, h, nodes, nextS, in.Roles)
	}
	return h
}

// splitBrain measures two primaries at once in [from, to).
func splitBrain(from, to float64, in HAInput) *SplitBrain {
	sb := &SplitBrain{}
	// The servers: periods out of recovery.
	var servers []interval
	winnerAt := math.Inf(-1)
	for _, r := range in.Roles {
		if r.Source != FromServer || r.Role != RolePrimary {
			continue
		}
		if a, b := math.Max(r.FromS, from), math.Min(r.ToS, to); a < b {
			servers = append(servers, interval{r.Node, a, b})
			if a >= winnerAt {
				sb.Winner, winnerAt = r.Node, a
			}
		}
	}
	sb.ServersOverlapMs = round3(overlap(servers) * 1000)
	// The clients: each run of one user's commits at one node, broken
	// where the user waited longer than AckRunGapS for the next one (a
	// connection that hung through a partition and took writes again
	// after it did not take them meanwhile).
	var acked []interval
	for i := 0; i < len(in.Acks); {
		j := i
		for j+1 < len(in.Acks) && in.Acks[j+1].User == in.Acks[i].User && in.Acks[j+1].Node == in.Acks[i].Node &&
			in.Acks[j+1].S-in.Acks[j].S <= AckRunGapS {
			j++
		}
		if a, b := math.Max(in.Acks[i].S, from), math.Min(in.Acks[j].S, to); a <= b && in.Acks[i].Node != "" {
			acked = append(acked, interval{in.Acks[i].Node, a, b})
		}
		i = j + 1
	}
	sb.AckedOverlapMs = round3(overlap(acked) * 1000)
	// The losing side: commits elsewhere while the winner was primary.
	var winner []interval
	for _, iv := range servers {
		if iv.node == sb.Winner {
			winner = append(winner, iv)
		}
	}
	var surviving int64
	for _, a := range in.Acks {
		if a.Node == "" || a.Node == sb.Winner || a.S < from || a.S >= to {
			continue
		}
		for _, w := range winner {
			if w.from <= a.S && a.S < w.to {
				sb.LosingSideWrites++
				if a.Found {
					surviving++
				}
				break
			}
		}
	}
	if in.Checked {
		sb.Surviving = &surviving
	}
	return sb
}

// rejoin follows the old primary after the failover.
func rejoin(sp Span, h *HA, nodes []string, nextS float64, roles []RoleSpan) *Rejoin {
	rj := &Rejoin{Node: h.OldPrimary}
	from := sp.AtS
	if sp.HealS != nil {
		from = *sp.HealS
	}
	at := math.Inf(1)
	for _, r := range roles {
		if r.Node == h.OldPrimary && r.Source == FromServer && r.Role == RoleStreaming && r.FromS > sp.AtS && r.FromS < nextS && r.FromS < at {
			at = r.FromS
		}
	}
	if math.IsInf(at, 1) {
		return rj
	}
	rj.Rejoined = true
	v := round3(math.Max(at-from, 0))
	rj.RejoinedS = &v
	// Fully redundant: at a moment from the rejoin on, one primary and
	// every other node streaming.
	var times []float64
	for _, r := range roles {
		if r.Source == FromServer && r.FromS >= at && r.FromS < nextS {
			times = append(times, r.FromS)
		}
	}
	times = append(times, at)
	sort.Float64s(times)
	for _, t := range times {
		primaries, streaming := 0, 0
		for _, n := range nodes {
			switch roleAt(roles, n, FromServer, t) {
			case RolePrimary:
				primaries++
			case RoleStreaming:
				streaming++
			}
		}
		if primaries == 1 && primaries+streaming == len(nodes) {
			v := round3(math.Max(t-from, 0))
			rj.RedundantS = &v
			break
		}
	}
	return rj
}

type interval struct {
	node     string
	from, to float64
}

// overlap is the time during which intervals of two nodes or more hold
// at once.
func overlap(ivs []interval) float64 {
	type edge struct {
		at    float64
		node  string
		delta int
	}
	var edges []edge
	for _, iv := range ivs {
		edges = append(edges, edge{iv.from, iv.node, 1}, edge{iv.to, iv.node, -1})
	}
	sort.SliceStable(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta > edges[j].delta // opens before closes: touching runs of one node stay one
	})
	open := map[string]int{}
	var total, last float64
	for _, e := range edges {
		if len(open) >= 2 {
			total += e.at - last
		}
		last = e.at
		open[e.node] += e.delta
		if open[e.node] == 0 {
			delete(open, e.node)
		}
	}
	return total
}

func roleNodes(roles []RoleSpan) []string {
	var out []string
	for _, r := range roles {
		if !slices.Contains(out, r.Node) {
			out = append(out, r.Node)
		}
	}
	sort.Strings(out)
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// HAStats are one fault's HA figures over its occurrences — every fault
// of the run (or of the repetitions) that the same words describe, as a
// nemesis that kills the primary again and again measures them — each
// with its median, 95th percentile and the mean's 95 % confidence
// interval.
type HAStats struct {
	What string `json:"what"`
	// N is how many occurrences there were; Failovers how many made
	// another node primary.
	N         int `json:"n"`
	Failovers int `json:"failovers"`
	// UnavailableS is the longest time without a commit (the clients'
	// RTO); PromotedS, ElectedS and ClientsS the time until a new primary
	// took writes as its server, the manager and the clients saw it.
	UnavailableS Dist `json:"unavailable_s"`
	PromotedS    Dist `json:"promoted_s"`
	ElectedS     Dist `json:"elected_s"`
	ClientsS     Dist `json:"clients_s"`
	// Lost sums the acknowledged commits lost over the occurrences that
	// were checked (LostChecked of them).
	Lost        int64 `json:"lost"`
	LostChecked int   `json:"lost_checked"`
	// SplitBrainMs is the time two nodes acknowledged commits at once,
	// over the occurrences where it was measured; LosingSideWrites and
	// Surviving sum over them.
	SplitBrainMs     Dist  `json:"split_brain_ms"`
	LosingSideWrites int64 `json:"losing_side_writes"`
	Surviving        int64 `json:"surviving"`
	// Rejoined counts the failovers whose old primary came back as a
	// standby by itself; RejoinedS and RedundantS are their times.
	Rejoined   int  `json:"rejoined"`
	RejoinedS  Dist `json:"rejoined_s"`
	RedundantS Dist `json:"redundant_s"`
}

// Dist is a figure over occurrences.
type Dist struct {
	N      int     `json:"n"`
	P50    float64 `json:"p50"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	CIHalf float64 `json:"ci95_half_width"` // 0 with fewer than 2
}

// FoldHA groups the faults that carry HA figures by what they were and
// sums each group up, in the order the groups first appear.
func FoldHA(sums []Summary) []HAStats {
	var out []HAStats
	idx := map[string]int{}
	vals := map[string]map[string][]float64{}
	for i := range sums {
		s := &sums[i]
		if s.HA == nil {
			continue
		}
		k, ok := idx[s.What]
		if !ok {
			k = len(out)
			idx[s.What] = k
			out = append(out, HAStats{What: s.What})
			vals[s.What] = map[string][]float64{}
		}
		g, v := &out[k], vals[s.What]
		g.N++
		v["unavailable"] = append(v["unavailable"], s.UnavailableS)
		h := s.HA
		add := func(name string, p *float64) {
			if p != nil {
				v[name] = append(v[name], *p)
			}
		}
		if h.PromotedS != nil || h.ElectedS != nil {
			g.Failovers++
		}
		add("promoted", h.PromotedS)
		add("elected", h.ElectedS)
		add("clients", h.ClientsS)
		if h.Lost != nil {
			g.Lost += *h.Lost
			g.LostChecked++
		}
		if sb := h.SplitBrain; sb != nil {
			v["split"] = append(v["split"], sb.AckedOverlapMs)
			g.LosingSideWrites += sb.LosingSideWrites
			if sb.Surviving != nil {
				g.Surviving += *sb.Surviving
			}
		}
		if rj := h.Rejoin; rj != nil && rj.Rejoined {
			g.Rejoined++
			add("rejoined", rj.RejoinedS)
			add("redundant", rj.RedundantS)
		}
	}
	for i := range out {
		v := vals[out[i].What]
		out[i].UnavailableS = dist(v["unavailable"])
		out[i].PromotedS = dist(v["promoted"])
		out[i].ElectedS = dist(v["elected"])
		out[i].ClientsS = dist(v["clients"])
		out[i].SplitBrainMs = dist(v["split"])
		out[i].RejoinedS = dist(v["rejoined"])
		out[i].RedundantS = dist(v["redundant"])
	}
	return out
}

// dist sums xs up: nearest-rank percentiles, the mean and its 95 % CI.
func dist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	rank := func(p float64) float64 { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	ci := stats.MeanCI(s, 0.95)
	return Dist{N: len(s), P50: round3(rank(0.5)), P95: round3(rank(0.95)), Max: round3(s[len(s)-1]), Mean: round3(ci.Mean), CIHalf: round3(ci.HalfWidth)}
}

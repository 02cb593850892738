package lagprobe

// The position method's join. A commit is visible at a replica from the
// first poll whose applied position is at or past the commit's position,
// and its lag is that poll's end minus the moment its COMMIT was sent (an
// upper bound, as with stamps: the change became visible before the poll
// ended, after the previous poll read). Commits and polls go in as the
// watcher learns them: a commit once its COMMIT has returned with its
// position — which may be after polls that already showed it, when a
// synchronous standby applies before the primary answers —, a poll once it
// returned. Sightings come out. It is pure: no clock, no I/O, no
// goroutines; join_test.go checks it to the nanosecond.

// posCommit is one committed transaction: when its COMMIT was sent (the
// probe's clock, ns), its commit's position, and its writer and place in
// the writer's log (from 1).
type posCommit struct {
	sent, pos int64
	writer    int
	seq       int64
}

// sighting says a commit was first visible at the poll that ended at At.
// First: that poll was the join's first, the baseline, which dates
// nothing (the commit was visible before the watch began).
type sighting struct {
	c     posCommit
	at    int64
	first bool
}

// defaultKeep is how many polls a join remembers for commits that return
// after a poll showed them: 65 s at 1 ms, far longer than a COMMIT waits
// for a synchronous standby.
const defaultKeep = 1 << 16

// join matches one replica's polls with commits.
type join struct {
	hist   []histPoll // the latest polls, a ring: poll k is hist[k%len(hist)]
	polls  int64      // polls so far
	maxPos int64      // the highest position read so far
	wait   posHeap    // commits no poll has reached yet, lowest position first
}

// histPoll is one poll as the join remembers it: when it ended, and the
// highest position read by then. The running maximum is what makes "the
// first poll at or past a position" well defined when a replica's
// position goes back (a restarted standby replays from its last
// checkpoint): a commit seen once stays seen.
type histPoll struct{ end, max int64 }

func newJoin(keep int) *join {
	if keep <= 0 {
		keep = defaultKeep
	}
	return &join{hist: make([]histPoll, keep)}
}

// poll takes a poll that ended at end and read position pos, and appends
// to out the waiting commits it is the first to show.
func (j *join) poll(end, pos int64, out []sighting) []sighting {
	if j.polls == 0 || pos > j.maxPos {
		j.maxPos = pos
	}
	first := j.polls == 0
	j.hist[j.polls%int64(len(j.hist))] = histPoll{end: end, max: j.maxPos}
	j.polls++
	for len(j.wait) > 0 && j.wait[0].pos <= j.maxPos {
		out = append(out, sighting{c: j.wait.pop(), at: end, first: first})
	}
	return out
}

// How add found a commit.
const (
	waiting   = iota // no poll has reached it yet: a later poll will say
	seen             // a poll already showed it: the sighting says which
	truncated        // the polls remembered all show it: the first that did was forgotten
)

// add takes a commit. If a poll already showed it, the first that did is
// its sighting (seen); otherwise it waits for the poll that will.
func (j *join) add(c posCommit) (sighting, int) {
	if j.polls == 0 || j.maxPos < c.pos {
		j.wait.push(c)
		return sighting{}, waiting
	}
	lo := max(j.polls-int64(len(j.hist)), 0)
	if lo > 0 && j.at(lo).max >= c.pos {
		return sighting{c: c}, truncated
	}
	// The smallest k in [lo, polls) whose running maximum reaches c.pos:
	// the last poll's does.
	hi := j.polls - 1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if j.at(mid).max >= c.pos {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return sighting{c: c, at: j.at(lo).end, first: lo == 0}, seen
}

// pending is how many commits wait for a poll.
func (j *join) pending() int { return len(j.wait) }

func (j *join) at(k int64) histPoll { return j.hist[k%int64(len(j.hist))] }

// posHeap is a min-heap of commits by position (container/heap would box
// each commit).
type posHeap []posCommit

func (h *posHeap) push(c posCommit) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].pos <= s[i].pos {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *posHeap) pop() posCommit {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s[l].pos < s[m].pos {
			m = l
		}
		if r < n && s[r].pos < s[m].pos {
			m = r
		}
		if m == i {
			break
		}
		s[m], s[i] = s[i], s[m]
		i = m
	}
	*h = s
	return top
}

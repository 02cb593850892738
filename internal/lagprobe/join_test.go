package lagprobe

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A scripted join: commits and polls in the order a watcher learns them,
// and what each should say, to the nanosecond.
type joinStep struct {
	commit *posCommit // add this commit, or
	poll   [2]int64   // a poll: its end and the position it read
	// Expected: the sightings of the step (their commits' sent time and
	// when they were seen), and for a commit how add found it.
	seen []seenAt
	how  int
}

type seenAt struct {
	sent, at int64
	first    bool
}

func c(sent, pos int64) *posCommit { return &posCommit{sent: sent, pos: pos} }

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keep  int
		steps []joinStep
	}{
		{"a commit is seen at the end of the first poll at or past its position", 0, []joinStep{
			{poll: [2]int64{1_000, 100}, seen: nil},
			{commit: c(1_500, 150), how: waiting},
			{poll: [2]int64{2_000, 149}},
			{poll: [2]int64{3_000, 150}, seen: []seenAt{{1_500, 3_000, false}}},
			{poll: [2]int64{4_000, 500}},
		}},
		{"one poll past several commits shows them all", 0, []joinStep{
			{poll: [2]int64{1_000, 100}},
			{commit: c(1_100, 110), how: waiting},
			{commit: c(1_200, 120), how: waiting},
			{commit: c(1_300, 130), how: waiting},
			{poll: [2]int64{2_000, 125}, seen: []seenAt{{1_100, 2_000, false}, {1_200, 2_000, false}}},
			{poll: [2]int64{3_001, 131}, seen: []seenAt{{1_300, 3_001, false}}},
		}},
		{"a commit that returns after polls showed it (a synchronous standby) takes the first that did", 0, []joinStep{
			{poll: [2]int64{1_000, 100}},
			{poll: [2]int64{2_000, 110}},
			{poll: [2]int64{3_000, 150}},
			{poll: [2]int64{4_000, 160}},
			{commit: c(1_500, 150), how: seen, seen: []seenAt{{1_500, 3_000, false}}},
			{commit: c(1_600, 111), how: seen, seen: []seenAt{{1_600, 3_000, false}}},
			{commit: c(3_500, 160), how: seen, seen: []seenAt{{3_500, 4_000, false}}},
			{commit: c(3_600, 161), how: waiting},
		}},
		{"what the baseline poll shows is dated by nothing", 0, []joinStep{
			{commit: c(500, 90), how: waiting},
			{poll: [2]int64{1_000, 100}, seen: []seenAt{{500, 1_000, true}}},
			{commit: c(600, 95), how: seen, seen: []seenAt{{600, 1_000, true}}},
			{commit: c(1_200, 101), how: waiting},
		}},
		{"a replica that goes back (a restart) does not hide what it showed", 0, []joinStep{
			{poll: [2]int64{1_000, 100}},
			{poll: [2]int64{2_000, 200}},
			{poll: [2]int64{3_000, 50}}, // restarted: replays from its checkpoint
			{commit: c(1_500, 180), how: seen, seen: []seenAt{{1_500, 2_000, false}}},
			{commit: c(2_500, 210), how: waiting},
			{poll: [2]int64{4_000, 190}},
			{poll: [2]int64{5_000, 210}, seen: []seenAt{{2_500, 5_000, false}}},
		}},
		{"commits out of position order wait in position order", 0, []joinStep{
			{poll: [2]int64{1_000, 100}},
			{commit: c(1_100, 300), how: waiting},
			{commit: c(1_200, 200), how: waiting},
			{poll: [2]int64{2_000, 250}, seen: []seenAt{{1_200, 2_000, false}}},
			{poll: [2]int64{3_000, 300}, seen: []seenAt{{1_100, 3_000, false}}},
		}},
		{"polls forgotten: a commit that returns later is counted, not dated", 3, []joinStep{
			{poll: [2]int64{1_000, 100}},
			{poll: [2]int64{2_000, 200}},
			{poll: [2]int64{3_000, 300}},
			{poll: [2]int64{4_000, 400}},
			{commit: c(1_500, 150), how: truncated}, // poll 2 is forgotten, poll 3 (300) already past
			{commit: c(2_500, 250), how: seen, seen: []seenAt{{2_500, 3_000, false}}},
			{commit: c(3_500, 400), how: seen, seen: []seenAt{{3_500, 4_000, false}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJoin(tc.keep)
			for i, st := range tc.steps {
				var got []sighting
				if st.commit != nil {
					s, how := j.add(*st.commit)
					if how != st.how {
						t.Fatalf("step %d: add %+v: how %d, want %d", i, *st.commit, how, st.how)
					}
					if how == seen {
						got = []sighting{s}
					}
				} else {
					got = j.poll(st.poll[0], st.poll[1], nil)
				}
				var g []seenAt
				for _, s := range got {
					g = append(g, seenAt{s.c.sent, s.at, s.first})
				}
				if !slices.Equal(g, st.seen) {
					t.Fatalf("step %d: saw %v, want %v", i, g, st.seen)
				}
			}
		})
	}
}

// TestJoinAgainstBruteForce: random commits and polls, the join against
// the definition (the first poll, in time order, whose position or an
// earlier one's is at or past the commit's).
func TestJoinAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		j := newJoin(0)
		var polls []histPoll // end, position read
		type rec struct {
			c     posCommit
			at    int64
			found bool
		}
		var recs []*rec
		now, pos := int64(0), int64(0)
		for range 300 {
			now += 1 + r.Int64N(1000)
			if r.IntN(2) == 0 {
				pos += r.Int64N(50) - 10 // mostly forwards, now and then back
				for _, s := range j.poll(now, pos, nil) {
					for _, x := range recs {
						if x.c == s.c && !x.found {
							x.at, x.found = s.at, true
							break
						}
					}
				}
				polls = append(polls, histPoll{now, pos})
				continue
			}
			x := &rec{c: posCommit{sent: now, pos: pos + r.Int64N(60) - 30, writer: len(recs)}}
			recs = append(recs, x)
			if s, how := j.add(x.c); how == seen {
				x.at, x.found = s.at, true
			}
		}
		for _, x := range recs {
			var want int64
			found := false
			for _, p := range polls {
				if p.max >= x.c.pos {
					want, found = p.end, true
					break
				}
			}
			if found != x.found || want != x.at {
				t.Fatalf("round %d: commit %+v: join says %v at %d, brute force %v at %d", round, x.c, x.found, x.at, found, want)
			}
		}
	}
}

package check

import (
	"fmt"
	"slices"

	"replab/internal/history"
)

// internal finds transactions whose reads disagree with their own earlier
// writes and reads of the same key: a read after the transaction's own
// append must end with what it appended (and equal its earlier read plus
// its appends, when it read before); a register read after its own write
// must return that value, after its own read the same value.
func (c *checker) internal() {
	type state struct {
		key   int64
		known bool    // list: base is the key's list before since; register: val is its value
		base  []int64 // list: the last read
		since []int64 // list: own appends after base (or since the start)
		val   int64   // register
		isNil bool
		what  string // register: how val came about, for the witness
	}
	var sts []state
	for i := 0; i < c.n; i++ {
		if c.st[i] != stOK {
			continue
		}
		op := &c.ops[i]
		sts = sts[:0]
		get := func(k int64) *state {
			for x := range sts {
				if sts[x].key == k {
					return &sts[x]
				}
			}
			sts = append(sts, state{key: k})
			return &sts[len(sts)-1]
		}
		var reported []int64
		report := func(k int64, detail string) {
			if slices.Contains(reported, k) {
				return
			}
			reported = append(reported, k)
			c.res.add(c.opts.MaxWitnesses, Witness{Class: Internal,
				Summary: fmt.Sprintf("%s's read of key %d disagrees with its own earlier operations", c.name(int32(i)), k),
				Txns:    []Txn{c.txnW(int32(i))}, Details: []string{detail}})
		}
		t := c.name(int32(i))
		for _, m := range op.Value {
			s := get(m.Key)
			switch {
			case m.Fn == history.FnAppend:
				s.since = append(s.since, m.Value)
			case m.Fn == history.FnWrite:
				s.known, s.val, s.isNil = true, m.Value, false
				s.what = fmt.Sprintf("writing %d to it", m.Value)
			case m.Got == history.GotList:
				switch {
				case s.known && len(s.since) == 0 && !slices.Equal(m.List, s.base):
					report(m.Key, fmt.Sprintf("%s read key %d as %s after reading it as %s in the same transaction",
						t, m.Key, history.ListText(m.List), history.ListText(s.base)))
				case s.known && !slices.Equal(m.List, append(s.base[:len(s.base):len(s.base)], s.since...)):
					report(m.Key, fmt.Sprintf("%s read key %d as %s, but it had read %s and appended %s since: the read should be %s",
						t, m.Key, history.ListText(m.List), history.ListText(s.base), joinInts(s.since),
						history.ListText(append(s.base[:len(s.base):len(s.base)], s.since...))))
				case !s.known && len(s.since) > 0 && !hasSuffix(m.List, s.since):
					report(m.Key, fmt.Sprintf("%s read key %d as %s after appending %s to it: the read should end with %s",
						t, m.Key, history.ListText(m.List), joinInts(s.since), history.ListText(s.since)))
				}
				s.known, s.base, s.since = true, m.List, nil
			case m.Got == history.GotValue || c.kind[m.Key] == kindRegister:
				isNil := m.Got == history.GotNull
				if s.known && (isNil != s.isNil || !isNil && m.Value != s.val) {
					report(m.Key, fmt.Sprintf("%s read key %d = %s after %s in the same transaction", t, m.Key, regText(m.Value, isNil), s.what))
				}
				s.known, s.val, s.isNil = true, m.Value, isNil
				s.what = fmt.Sprintf("reading it as %s", regText(m.Value, isNil))
			}
		}
	}
}

func hasSuffix(l, suf []int64) bool {
	return len(l) >= len(suf) && slices.Equal(l[len(l)-len(suf):], suf)
}

func joinInts(l []int64) string {
	s := history.ListText(l)
	return s[1 : len(s)-1]
}

// regText is a register value as read: the number, or nil.
func regText(v int64, isNil bool) string {
	if isNil {
		return "nil"
	}
	return fmt.Sprint(v)
}

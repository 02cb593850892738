package workload

import (
	"testing"

	"replab/internal/history"
)

// TestNilRecorderDoesNothing: a run that records no history hands the
// workload nil; every method is then a no-op and nothing is allocated.
func TestNilRecorderDoesNothing(t *testing.T) {
	var r *Recorder
	allocs := testing.AllocsPerRun(100, func() {
		r.Record([]history.Mop{history.Append(1, 2)})
		if i := r.Add(history.ReadNull(1)); i != -1 {
			t.Errorf("Add on nil = %d", i)
		}
		r.AtNode("p")
		if r.On() || r.Mop(0) != nil || r.Mops() != nil || r.Node() != "" {
			t.Error("a nil recorder holds something")
		}
	})
	if allocs > 1 { // the slice literal given to Record
		t.Errorf("%.0f allocations per call on a nil recorder", allocs)
	}
}

// TestRecorderKeepsTheWorkloadsSliceAndResets: Record keeps the slice
// (reads filled in afterwards show), Add fills the recorder's own, Reset
// forgets both and the node.
func TestRecorderKeepsTheWorkloadsSliceAndResets(t *testing.T) {
	r := &Recorder{}
	plan := []history.Mop{history.Append(1, 10), history.ReadNull(2)}
	r.Record(plan)
	plan[1] = history.ReadList(2, []int64{5})
	r.AtNode("p1")
	if got := history.MopsText(r.Mops()); got != "[append 1 10] [r 2 [5]]" || r.Node() != "p1" || !r.On() {
		t.Errorf("recorded %s at %q", got, r.Node())
	}
	r.Reset()
	if len(r.Mops()) != 0 || r.Node() != "" {
		t.Errorf("after Reset: %v at %q", r.Mops(), r.Node())
	}
	i := r.Add(history.ReadNull(3))
	r.Add(history.Write(3, 7))
	*r.Mop(i) = history.ReadValue(3, 6)
	if got := history.MopsText(r.Mops()); got != "[r 3 6] [w 3 7]" || r.Mop(2) != nil {
		t.Errorf("added %s", got)
	}
	if plan[0].String() != history.Append(1, 10).String() {
		t.Error("Add wrote into the slice of an earlier attempt")
	}
}

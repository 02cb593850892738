package check

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"replab/internal/history"
)

// The property test: for transactions of one operation on one register,
// strict serializability is linearizability, so the checker's verdict on
// strict-serializable must be Porcupine's on linearizability, history for
// history. The histories come from simulating a linearizable register
// (each operation takes effect at a point inside its interval) with
// concurrent processes, half of them then broken on purpose: a read made
// stale, a write lost, a read of a value that was never current then, a
// write that failed but took effect.

// regInput is a register operation for Porcupine.
type regInput struct {
	write bool
	v     int64
}

// nilValue stands for the initial nil in Porcupine's model.
const nilValue = -1

var registerModel = porcupine.Model{
	Init: func() interface{} { return int64(nilValue) },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		in := input.(regInput)
		if in.write {
			return true, in.v
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("w %d", in.v)
		}
		return fmt.Sprintf("r %d", output)
	},
}

// simOp is one generated operation before it becomes a history.Op.
type simOp struct {
	proc     int
	write    bool
	v        int64 // written, or read (nilValue: nil)
	inv, lp  int64 // invocation; the point it takes effect (-1: never)
	comp     int64
	typ      history.Type
	injected string
}

// genRegisterHistory simulates a linearizable register and then, when
// inject is set, breaks one operation.
func genRegisterHistory(rng *rand.Rand, inject bool, size int) ([]simOp, string) {
	procs := 2 + rng.IntN(size)
	var ops []simOp
	next := int64(1)
	for p := range procs {
		t := int64(rng.IntN(40))
		n := 2 + rng.IntN(size+2)
		for range n {
			inv := t + 1 + int64(rng.IntN(15))
			dur := 2 + int64(rng.IntN(40))
			o := simOp{proc: p, inv: inv, comp: inv + dur, typ: history.OK}
			o.lp = inv + 1 + int64(rng.IntN(int(dur-1)))
			if rng.IntN(2) == 0 {
				o.write, o.v = true, next
				next++
				if rng.IntN(12) == 0 { // unknown outcome: it may or may not take effect, later
					o.typ = history.Info
					if rng.IntN(2) == 0 {
						o.lp = -1
					} else {
						o.lp = inv + 1 + int64(rng.IntN(200))
					}
					ops = append(ops, o)
					break // the process's connection is gone
				}
			}
			ops = append(ops, o)
			t = o.comp
		}
	}
	// Unique times: scale up and add a distinct offset per event.
	for i := range ops {
		ops[i].inv = ops[i].inv*1000 + int64(i)
		ops[i].comp = ops[i].comp*1000 + 500 + int64(i)
		if ops[i].lp >= 0 {
			ops[i].lp = ops[i].lp*1000 + 250 + int64(i)
		}
	}
	what := ""
	var lost int64 = -1
	if inject {
		var writes, reads []int
		for i, o := range ops {
			if o.write && o.typ == history.OK {
				writes = append(writes, i)
			} else if !o.write {
				reads = append(reads, i)
			}
		}
		switch k := rng.IntN(4); {
		case k == 0 && len(writes) > 0: // a write acknowledged but lost
			i := writes[rng.IntN(len(writes))]
			lost = ops[i].v
			what = fmt.Sprintf("write of %d lost", lost)
		case k == 1 && len(writes) > 0: // a write that failed took effect
			i := writes[rng.IntN(len(writes))]
			ops[i].typ = history.Fail
			what = fmt.Sprintf("write of %d failed but took effect", ops[i].v)
		default:
			what = "read of another value" // decided after the simulation
		}
	}
	// Simulate: apply in the order of the points.
	order := make([]int, 0, len(ops))
	for i, o := range ops {
		if o.lp >= 0 {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return ops[order[a]].lp < ops[order[b]].lp })
	state := int64(nilValue)
	var values []int64
	for _, i := range order {
		o := &ops[i]
		if o.write {
			values = append(values, o.v)
			if o.v != lost {
				state = o.v
			}
		} else {
			o.v = state
		}
	}
	if what == "read of another value" {
		var reads []int
		for i, o := range ops {
			if !o.write {
				reads = append(reads, i)
			}
		}
		if len(reads) > 0 && len(values) > 0 {
			i := reads[rng.IntN(len(reads))]
			old := ops[i].v
			if rng.IntN(4) == 0 {
				ops[i].v = nilValue
			} else {
				ops[i].v = values[rng.IntN(len(values))]
			}
			what = fmt.Sprintf("read of %d changed to %d", old, ops[i].v)
		} else {
			what = ""
		}
	}
	return ops, what
}

func toHistory(ops []simOp) []history.Op {
	out := make([]history.Op, len(ops))
	for i, o := range ops {
		m := history.ReadValue(0, o.v)
		switch {
		case o.write:
			m = history.Write(0, o.v)
		case o.v == nilValue:
			m = history.ReadNull(0)
		}
		out[i] = history.Op{Index: i, Process: o.proc, Node: "n", Type: o.typ, F: history.FTxn,
			InvokeNs: o.inv, CompleteNs: o.comp, Value: []history.Mop{m}}
	}
	return out
}

func toPorcupine(ops []simOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		switch {
		case o.typ == history.Fail:
			continue // it did not happen
		case o.write && o.typ == history.Info:
			out = append(out, porcupine.Operation{ClientId: o.proc, Input: regInput{true, o.v}, Call: o.inv, Output: nil, Return: math.MaxInt64})
		case o.write:
			out = append(out, porcupine.Operation{ClientId: o.proc, Input: regInput{true, o.v}, Call: o.inv, Output: nil, Return: o.comp})
		default:
			out = append(out, porcupine.Operation{ClientId: o.proc, Input: regInput{false, 0}, Call: o.inv, Output: o.v, Return: o.comp})
		}
	}
	return out
}

func describeSim(ops []simOp) string {
	var b strings.Builder
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return ops[idx[a]].inv < ops[idx[b]].inv })
	for _, i := range idx {
		o := ops[i]
		f := "r"
		if o.write {
			f = "w"
		}
		fmt.Fprintf(&b, "  T%d p%d %s %s %d [%d, %d]\n", i, o.proc, o.typ, f, o.v, o.inv, o.comp)
	}
	return b.String()
}

func TestStrictSerializableAgreesWithPorcupineOnRegisterHistories(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 200
	}
	var linear, broken, injected int
	for i := range n {
		rng := rand.New(rand.NewPCG(31, uint64(i)))
		// Most histories are small; every tenth is larger (up to 9
		// processes of up to 12 operations).
		size := 4
		if i%10 == 9 {
			size = 8
		}
		ops, what := genRegisterHistory(rng, i%2 == 1, size)
		if what != "" {
			injected++
		}
		want := porcupine.CheckOperations(registerModel, toPorcupine(ops))
		res, err := Check(toHistory(ops), Options{})
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		got := !res.Violated(StrictSerializable)
		if got != want {
			var text strings.Builder
			_ = res.WriteText(&text, 3)
			t.Fatalf("history %d (%s): checker says strict-serializable %v, Porcupine says linearizable %v\n%s\n%s", i, what, got, want, describeSim(ops), text.String())
		}
		if want {
			linear++
		} else {
			broken++
		}
	}
	t.Logf("%d histories: %d linearizable, %d not (%d with an injected fault)", n, linear, broken, injected)
	if broken < n/5 || linear < n/5 {
		t.Errorf("the generator is lopsided: %d linearizable, %d not", linear, broken)
	}
}

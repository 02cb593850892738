package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"replab/internal/testkit"
	"strings"
	"sync"
	"testing"
)

// golden compares got with testdata/name (go test -update rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// sample is a small history with every kind of micro-operation and outcome.
func sample() []Op {
	return []Op{
		{Process: 0, Node: "eu", Type: OK, F: FTxn, InvokeNs: 1_000_000, CompleteNs: 1_300_000, TxnType: "append",
			Value: []Mop{Append(5, 12), ReadList(7, []int64{1, 2})}},
		{Process: 1, Node: "us", Type: Fail, F: FTxn, InvokeNs: 1_100_000, CompleteNs: 1_200_000, TxnType: "append",
			Value: []Mop{Append(5, 13), ReadNull(7)}, Error: "40001"},
		{Process: 2, Node: "asia", Type: Info, F: FTxn, InvokeNs: 1_250_000, CompleteNs: 9_000_000, TxnType: "rw",
			Value: []Mop{Write(3, 4), ReadNull(3)}, Error: "timeout"},
		{Process: 0, Node: "eu", Type: OK, F: FTxn, InvokeNs: 1_300_000, CompleteNs: 1_500_000, TxnType: "read",
			Value: []Mop{ReadList(5, nil), ReadValue(3, 4), ReadNull(9)}},
		{Process: 3, Node: `odd "node"\name` + "\n\x01é", Type: OK, F: FTxn, InvokeNs: 1_400_000, CompleteNs: 1_450_000,
			TxnType: "neg", Value: []Mop{Write(-1, -9223372036854775808), ReadValue(-1, 9223372036854775807)}},
	}
}

func writeAll(t *testing.T, ops []Op) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i, op := range ops {
		idx, err := w.Record(op)
		if err != nil || idx != i {
			t.Fatalf("Record %d = %d, %v", i, idx, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(t *testing.T, data []byte) ([]Op, *CutShort, error) {
	t.Helper()
	r := NewReader(bytes.NewReader(data), "history.jsonl")
	var ops []Op
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops, r.CutShort(), nil
		}
		if err != nil {
			return ops, nil, err
		}
		ops = append(ops, op)
	}
}

// normalized is ops as they read back: indices assigned, empty list reads
// non-nil.
func normalized(ops []Op) []Op {
	out := make([]Op, len(ops))
	for i, op := range ops {
		op.Index = i
		op.Value = append([]Mop(nil), op.Value...)
		for j, m := range op.Value {
			if m.Got == GotList && m.List == nil {
				op.Value[j].List = []int64{}
			}
		}
		out[i] = op
	}
	return out
}

func TestWriterThenReaderGiveTheSameOperations(t *testing.T) {
	data := writeAll(t, sample())
	golden(t, "sample.jsonl.golden", data)
	got, cut, err := readAll(t, data)
	if err != nil || cut != nil {
		t.Fatalf("read: %v, cut %v", err, cut)
	}
	if want := normalized(sample()); !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
	t.Run("each line is what encoding/json reads too", func(t *testing.T) {
		for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("line %d: %v", i+1, err)
			}
		}
	})
}

func TestReaderReportsACutShortLastLineAndKeepsTheRest(t *testing.T) {
	data := writeAll(t, sample())
	lines := bytes.SplitAfter(data, []byte("\n"))
	full := len(data) - len(lines[len(lines)-2]) // start of the last line (the final split is empty)
	cases := []struct {
		name string
		data []byte
		ops  int
		cut  *CutShort
	}{
		{"whole file: no cut", data, 5, nil},
		{"last newline missing: the line is complete", data[:len(data)-1], 5, nil},
		{"last line cut after its first byte", data[:full+1], 4, &CutShort{Ops: 4, Line: 5, Bytes: 1}},
		{"last line cut in the middle", data[:full+40], 4, &CutShort{Ops: 4, Line: 5, Bytes: 40}},
		{"last line cut before its closing brace", data[:len(data)-2], 4, &CutShort{Ops: 4, Line: 5, Bytes: len(data) - 2 - full}},
		{"zeros after a cut line (a crashed file system)", append(append([]byte{}, data[:full+30]...), make([]byte, 64)...),
			4, &CutShort{Ops: 4, Line: 5, Bytes: 94}},
		{"blank lines after the last line", append(append([]byte{}, data...), "\n\n  \n"...), 5, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, cut, err := readAll(t, c.data)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != c.ops || !reflect.DeepEqual(cut, c.cut) {
				t.Errorf("read %d ops, cut %+v; want %d, %+v", len(ops), cut, c.ops, c.cut)
			}
			if cut != nil && !strings.Contains(cut.String(), fmt.Sprintf("after %d complete operations at line %d", c.ops, c.cut.Line)) {
				t.Errorf("CutShort says %q", cut)
			}
		})
	}
}

func TestReaderRefusesAMalformedLineBeforeTheEnd(t *testing.T) {
	good := writeAll(t, sample()[:1])
	cases := []struct {
		name, bad, want string
	}{
		{"not JSON", "{index: 1}", "history.jsonl:2: malformed JSON"},
		{"not an object", "[1,2]", "history.jsonl:2: not a JSON object"},
		{"unknown type", `{"index":1,"type":"maybe","f":"txn","value":[]}`, `history.jsonl:2: malformed operation: type "maybe"`},
		{"no f", `{"index":1,"type":"ok","value":[]}`, `history.jsonl:2: malformed operation: no "f"`},
		{"completes before it starts", `{"type":"ok","f":"txn","invoke_ns":5,"complete_ns":4,"value":[]}`, "complete_ns 4 is before invoke_ns 5"},
		{"unknown function", `{"type":"ok","f":"txn","value":[["cas",1,2]]}`, `micro-operation "cas"`},
		{"append of null", `{"type":"ok","f":"txn","value":[["append",1,null]]}`, "append 1: the value is null"},
		{"write of a list", `{"type":"ok","f":"txn","value":[["w",1,[2]]]}`, "w 1: the value is a list"},
		{"key not an integer", `{"type":"ok","f":"txn","value":[["r",1.5,null]]}`, `r key: "1.5": not a 64-bit integer`},
		{"value too large", `{"type":"ok","f":"txn","value":[["w",1,9223372036854775808]]}`, "not a 64-bit integer"},
		{"list element not an integer", `{"type":"ok","f":"txn","value":[["r",1,[1,"x"]]]}`, "list element 1"},
		{"two elements", `{"type":"ok","f":"txn","value":[["r",1]]}`, "expected , after the key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := append(append(append([]byte{}, good...), c.bad+"\n"...), good...)
			ops, _, err := readAll(t, data)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a ParseError at line 2 containing %q", err, c.want)
			}
			if len(ops) != 1 {
				t.Errorf("read %d ops before the bad line, want 1", len(ops))
			}
		})
	}
}

func TestReadTellsTheLineOfEachOperation(t *testing.T) {
	data := []byte("\n" + string(writeAll(t, sample()[:2])))
	r := NewReader(bytes.NewReader(data), "h")
	var lines []int
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		lines = append(lines, r.Line())
	}
	if !reflect.DeepEqual(lines, []int{2, 3}) {
		t.Errorf("lines %v, want [2 3]", lines)
	}
}

func TestReadAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range sample() {
		if _, err := w.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.Record(sample()[0]); err == nil {
		t.Error("Record after Close succeeded")
	}
	ops, cut, err := Read(path)
	if err != nil || cut != nil || len(ops) != 5 {
		t.Fatalf("Read = %d ops, %v, %v", len(ops), cut, err)
	}
	if _, _, err := Read(filepath.Join(t.TempDir(), "none.jsonl")); err == nil {
		t.Error("Read of a missing file succeeded")
	}
}

func TestRecordFromManyGoroutinesKeepsEveryLineWhole(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	const users, each = 16, 500
	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mops := []Mop{Append(int64(u), 0), ReadList(int64(u), []int64{1, 2, 3})}
			for i := range each {
				mops[0].Value = int64(i) // reused: Record must not keep it
				if _, err := w.Record(Op{Process: u, Node: "n", Type: OK, F: FTxn, InvokeNs: int64(i), CompleteNs: int64(i + 1), Value: mops}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ops, cut, err := readAll(t, buf.Bytes())
	if err != nil || cut != nil || len(ops) != users*each {
		t.Fatalf("read %d ops, %v, %v", len(ops), cut, err)
	}
	next := make([]int64, users)
	for i, op := range ops {
		if op.Index != i {
			t.Fatalf("line %d has index %d", i+1, op.Index)
		}
		if op.Value[0].Value != next[op.Process] {
			t.Fatalf("process %d: value %d, want %d (in its order)", op.Process, op.Value[0].Value, next[op.Process])
		}
		next[op.Process]++
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

func TestRecordAfterAWriteErrorReturnsIt(t *testing.T) {
	fw := &failingWriter{}
	w := NewWriter(fw)
	big := Op{Type: OK, F: FTxn, Value: []Mop{ReadList(1, make([]int64, bufferSize))}}
	if _, err := w.Record(big); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Record of a line larger than the buffer: %v", err)
	}
	if _, err := w.Record(sample()[0]); err == nil {
		t.Error("Record after a failed write succeeded")
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a failed write succeeded")
	}
}

func TestToJepsenEDN(t *testing.T) {
	ops, _, err := readAll(t, writeAll(t, sample()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ToJepsenEDN(&buf, ops); err != nil {
		t.Fatal(err)
	}
	golden(t, "sample.edn.golden", buf.Bytes())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2*len(ops) {
		t.Fatalf("%d lines, want %d", len(lines), 2*len(ops))
	}
	t.Run("each process alternates invoke and completion", func(t *testing.T) {
		open := map[string]bool{}
		for _, l := range lines {
			p := l[strings.Index(l, ":process ")+9:]
			p = p[:strings.IndexByte(p, ',')]
			inv := strings.HasPrefix(l, "{:type :invoke")
			if inv == open[p] {
				t.Fatalf("process %s: %s", p, l)
			}
			open[p] = inv
		}
	})
	t.Run("an operation that took no time", func(t *testing.T) {
		var b bytes.Buffer
		same := []Op{{Process: 1, Type: OK, F: FTxn, InvokeNs: 5, CompleteNs: 5, Value: []Mop{Write(1, 1)}},
			{Process: 2, Type: OK, F: FTxn, InvokeNs: 5, CompleteNs: 5, Value: []Mop{Write(1, 2)}, Index: 1}}
		if err := ToJepsenEDN(&b, same); err != nil {
			t.Fatal(err)
		}
		want := "{:type :invoke, :f :txn, :value [[:w 1 1]], :process 1, :time 0, :index 0}\n" +
			"{:type :invoke, :f :txn, :value [[:w 1 2]], :process 2, :time 0, :index 1}\n" +
			"{:type :ok, :f :txn, :value [[:w 1 1]], :process 1, :time 0, :index 2}\n" +
			"{:type :ok, :f :txn, :value [[:w 1 2]], :process 2, :time 0, :index 3}\n"
		if b.String() != want {
			t.Errorf("got\n%s\nwant\n%s", b.String(), want)
		}
	})
}

func TestMopsText(t *testing.T) {
	got := MopsText([]Mop{Append(5, 12), ReadList(7, []int64{1, 2}), ReadList(8, nil), Write(3, 4), ReadValue(3, 4), ReadNull(3)})
	want := "[append 5 12] [r 7 [1 2]] [r 8 []] [w 3 4] [r 3 4] [r 3 nil]"
	if got != want {
		t.Errorf("MopsText = %q, want %q", got, want)
	}
}

// BenchmarkRecord is the driver's cost per operation: users recording in
// parallel, a typical list-append transaction of four micro-operations.
func BenchmarkRecord(b *testing.B) {
	w := NewWriter(io.Discard)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mops := []Mop{Append(17, 123456), Append(18, 123457), ReadList(19, []int64{1, 2, 3, 4, 5, 6, 7, 8}), ReadList(20, []int64{9, 10})}
		op := Op{Process: 3, Node: "eu-west", Type: OK, F: FTxn, InvokeNs: 1_204_000_000_000, CompleteNs: 1_204_000_350_000, TxnType: "append", Value: mops}
		for pb.Next() {
			op.InvokeNs++
			if _, err := w.Record(op); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead is reading a history back, per operation.
func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	mops := []Mop{Append(17, 123456), Append(18, 123457), ReadList(19, []int64{1, 2, 3, 4, 5, 6, 7, 8}), ReadList(20, []int64{9, 10})}
	for i := range 10000 {
		_, _ = w.Record(Op{Process: i % 10, Node: "eu-west", Type: OK, F: FTxn, InvokeNs: int64(i), CompleteNs: int64(i + 5), TxnType: "append", Value: mops})
	}
	_ = w.Close()
	data := buf.Bytes()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "h")
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			n++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/op-read")
}

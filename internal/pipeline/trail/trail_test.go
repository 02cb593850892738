package trail

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// txn builds transaction i: a begin, n changes cycling through the ops, a
// commit. LSNs grow with i; the begin carries the commit LSN.
func txn(i, n int) []Record {
	commit := uint64(1000 + 100*i)
	xid := uint32(500 + i)
	ts := int64(1700000000000000000 + i)
	recs := []Record{{Op: OpBegin, LSN: commit, XID: xid, Time: ts}}
	for j := range n {
		id := strconv.Itoa(i*1000 + j)
		switch j % 3 {
		case 0:
			recs = append(recs, Record{Op: OpInsert, XID: xid, Schema: "public", Table: "orders",
				Columns: []string{"id", "customer", "amount", "note", "created"}, Key: []int{0},
				Values: []Value{val(id), val("7"), val("19.99"), null, val("2024-01-02 03:04:05+00")}})
		case 1:
			recs = append(recs, Record{Op: OpUpdate, XID: xid, Schema: "public", Table: "orders",
				Columns: []string{"id", "status"}, Key: []int{0},
				Values: []Value{val(id), val("shipped ✓")}, Old: []Value{val("old" + id)}})
		default:
			recs = append(recs, Record{Op: OpDelete, XID: xid, Schema: "public", Table: "orders",
				Columns: []string{"id"}, Key: []int{0}, Values: []Value{val(id)}})
		}
	}
	return append(recs, Record{Op: OpCommit, LSN: commit + 8, XID: xid, Time: ts})
}

// writeTrail writes the records to a new trail at path, syncing after every
// syncEvery-th record (0: only at Close), and returns each record's end.
func writeTrail(t testing.TB, path string, recs []Record, syncEvery int) []Pos {
	t.Helper()
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]Pos, len(recs))
	for i := range recs {
		if ends[i], err = w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
		if syncEvery > 0 && (i+1)%syncEvery == 0 {
			if _, _, err := w.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return ends
}

// readAll reads every complete record from pos on, without waiting.
func readAll(t testing.TB, path string, from Pos) ([]Record, []Pos) {
	t.Helper()
	r, err := Open(path, from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []Record
	var ends []Pos
	for {
		rec, end, ok, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return recs, ends
		}
		recs, ends = append(recs, rec), append(ends, end)
	}
}

func concat(txns ...[]Record) []Record {
	var all []Record
	for _, tx := range txns {
		all = append(all, tx...)
	}
	return all
}

func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.trl")
	var txns [][]Record
	for i := range 40 {
		txns = append(txns, txn(i, i%7))
	}
	// One transaction with a value past the 1 MiB flush threshold and the
	// reader's buffer size.
	big := txn(40, 0)
	big = append(big[:1], Record{Op: OpInsert, Schema: "public", Table: "blobs", Columns: []string{"id", "data"},
		Key: []int{0}, Values: []Value{val("1"), val(strings.Repeat("b", 3<<20/2))}}, big[1])
	txns = append(txns, big, txn(41, 2))
	recs := concat(txns...)

	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if w.Size() != 0 || w.LastCommit() != 0 {
		t.Fatalf("new trail: size %d, last commit %d", w.Size(), w.LastCommit())
	}
	ends := make([]Pos, len(recs))
	var lastCommit uint64
	for i := range recs {
		if ends[i], err = w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
		if ends[i] != w.Size() || (i > 0 && ends[i] <= ends[i-1]) {
			t.Fatalf("record %d: end %d, size %d", i, ends[i], w.Size())
		}
		if recs[i].Op == OpCommit {
			lastCommit = recs[i].LSN
		}
		if w.LastCommit() != lastCommit {
			t.Fatalf("record %d: LastCommit %d, want %d", i, w.LastCommit(), lastCommit)
		}
		if i%9 == 8 {
			pos, lsn, err := w.Sync()
			if err != nil || pos != ends[i] || lsn != lastCommit || w.Durable() != pos {
				t.Fatalf("Sync after record %d = %d, %d, %v; want %d, %d", i, pos, lsn, err, ends[i], lastCommit)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != int64(HeaderSize)+int64(ends[len(ends)-1]) {
		t.Fatalf("file size %v (%v), want header + %d", st.Size(), err, ends[len(ends)-1])
	}

	got, gotEnds := readAll(t, path, 0)
	sameRecords(t, got, recs)
	if !reflect.DeepEqual(gotEnds, ends) {
		t.Fatalf("read positions differ from Append's")
	}
	for _, k := range []int{0, 5, len(recs) - 2, len(recs) - 1} {
		got, gotEnds := readAll(t, path, ends[k])
		sameRecords(t, got, recs[k+1:])
		if len(gotEnds) > 0 && gotEnds[0] != ends[k+1] {
			t.Fatalf("from %d: first end %d, want %d", ends[k], gotEnds[0], ends[k+1])
		}
	}

	// Reopening a clean trail keeps everything.
	w, err = Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Size() != ends[len(ends)-1] || w.Durable() != w.Size() || w.LastCommit() != lastCommit || w.Discarded() != 0 {
		t.Fatalf("reopened: size %d durable %d last %d discarded %d", w.Size(), w.Durable(), w.LastCommit(), w.Discarded())
	}
	if pos, lsn, err := w.Sync(); pos != w.Size() || lsn != lastCommit || err != nil {
		t.Fatalf("Sync of reopened trail = %d, %d, %v", pos, lsn, err)
	}
}

func TestAppendInvalid(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "a.trl"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bad := []Record{
		{Op: 'X'},
		{Op: OpInsert, Columns: []string{"a"}},
		{Op: OpInsert, Columns: []string{"a"}, Values: []Value{val("1")}, Key: []int{1}},
		{Op: OpInsert, Columns: []string{"a"}, Values: []Value{val(strings.Repeat("x", MaxPayload))}},
	}
	for i := range bad {
		if _, err := w.Append(&bad[i]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Append(%+.40v): err %v, want ErrInvalid", bad[i], err)
		}
	}
	if w.Size() != 0 {
		t.Fatalf("refused records moved the size to %d", w.Size())
	}
	ok := txn(1, 1)
	for i := range ok {
		if _, err := w.Append(&ok[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, w.Path(), 0)
	sameRecords(t, got, ok)
}

func TestFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.trl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for i := range 200 {
		recs = append(recs, txn(i, i%5)...)
	}
	ends := make([]Pos, len(recs))
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		defer func() {
			if err := w.Close(); werr == nil {
				werr = err
			}
		}()
		for i := range recs {
			if ends[i], werr = w.Append(&recs[i]); werr != nil {
				return
			}
			if recs[i].Op == OpCommit {
				if _, _, werr = w.Sync(); werr != nil {
					return
				}
				if i%25 == 0 {
					time.Sleep(time.Millisecond) // let the reader catch up and wait
				}
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetPoll(time.Millisecond)
	got := make([]Record, 0, len(recs))
	gotEnds := make([]Pos, 0, len(recs))
	for range recs {
		rec, end, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(got), err)
		}
		got, gotEnds = append(got, rec), append(gotEnds, end)
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	sameRecords(t, got, recs)
	if !reflect.DeepEqual(gotEnds, ends) || r.Pos() != ends[len(ends)-1] {
		t.Fatalf("followed positions differ from Append's")
	}
	// At the end, Next waits until ctx is done.
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if _, _, err := r.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next at the end: err %v, want deadline exceeded", err)
	}
}

// recoveryCase writes three complete transactions and a last one, and
// returns the file's bytes, the end of the third commit, where the last
// transaction's frames start, and the records.
func recoveryCase(t *testing.T, dir string) (data []byte, prevEnd Pos, prevLSN uint64, complete, last []Record) {
	path := filepath.Join(dir, "src.trl")
	complete = concat(txn(0, 2), txn(1, 0), txn(2, 3))
	last = txn(3, 3)
	ends := writeTrail(t, path, concat(complete, last), 4)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, ends[len(complete)-1], complete[len(complete)-1].LSN, complete, last
}

// checkRecovered opens the damaged trail at path and checks that it holds
// exactly the complete transactions, then that appending after recovery
// works.
func checkRecovered(t *testing.T, path string, prevEnd Pos, prevLSN uint64, damaged int64, complete, last []Record, appendAfter bool) {
	t.Helper()
	w, err := Create(path)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if w.LastCommit() != prevLSN || w.Size() != prevEnd || w.Durable() != prevEnd || w.Discarded() != damaged-int64(prevEnd) {
		w.Close()
		t.Fatalf("recovered: last commit %d size %d durable %d discarded %d; want %d, %d, %d",
			w.LastCommit(), w.Size(), w.Durable(), w.Discarded(), prevLSN, prevEnd, damaged-int64(prevEnd))
	}
	if st, err := os.Stat(path); err != nil || st.Size() != int64(HeaderSize)+int64(prevEnd) {
		w.Close()
		t.Fatalf("file not cut to the last commit: %v, %v", st.Size(), err)
	}
	want := complete
	if appendAfter {
		for i := range last {
			if _, err := w.Append(&last[i]); err != nil {
				t.Fatal(err)
			}
		}
		want = concat(complete, last)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, path, 0)
	sameRecords(t, got, want)
}

func TestRecoverTruncated(t *testing.T) {
	dir := t.TempDir()
	data, prevEnd, prevLSN, complete, last := recoveryCase(t, dir)
	path := filepath.Join(dir, "crash.trl")
	full := Pos(len(data) - HeaderSize)
	// A crash can leave the file cut anywhere after the last durable commit.
	for cut := prevEnd; cut < full; cut++ {
		if err := os.WriteFile(path, data[:HeaderSize+int(cut)], 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprint("cut at ", cut), func(t *testing.T) {
			checkRecovered(t, path, prevEnd, prevLSN, int64(cut), complete, last, cut%5 == 0 || cut == full-1)
		})
	}
	// The whole file is a clean trail.
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if w.LastCommit() != last[len(last)-1].LSN || w.Size() != full || w.Discarded() != 0 {
		t.Fatalf("intact trail: last commit %d size %d discarded %d", w.LastCommit(), w.Size(), w.Discarded())
	}
	w.Close()
}

func TestRecoverFlipped(t *testing.T) {
	dir := t.TempDir()
	data, prevEnd, prevLSN, complete, last := recoveryCase(t, dir)
	path := filepath.Join(dir, "crash.trl")
	// A garbled byte anywhere in the last transaction's frames (torn sectors,
	// or pages that reached the disk out of order) cuts that transaction.
	for at := HeaderSize + int(prevEnd); at < len(data); at++ {
		bad := bytes.Clone(data)
		bad[at] ^= 0xff
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprint("flip at ", at-HeaderSize), func(t *testing.T) {
			checkRecovered(t, path, prevEnd, prevLSN, int64(len(data)-HeaderSize), complete, last, at%7 == 0)
		})
	}
}

func TestRecoverNoCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.trl")
	open := txn(0, 2)
	open = open[:len(open)-1]
	ends := writeTrail(t, path, open, 0)
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.LastCommit() != 0 || w.Size() != 0 || w.Discarded() != int64(ends[len(ends)-1]) {
		t.Fatalf("recovered: last commit %d size %d discarded %d", w.LastCommit(), w.Size(), w.Discarded())
	}
}

// frameOf is r's frame as a Writer writes it.
func frameOf(t testing.TB, r Record) []byte {
	t.Helper()
	b, err := appendFrame(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestReaderCorruptMiddle(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.trl")
	recs := concat(txn(0, 1), txn(1, 3), txn(2, 1))
	ends := writeTrail(t, src, recs, 0)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	const k = 4 // a frame in the middle: the second transaction's first change
	start := ends[k-1]
	undecodable := func(b []byte) {
		// A checksum-valid frame whose payload is garbage: not a torn write.
		fr := frameOf(t, recs[k])
		fr[4] = 'X'
		copy(b[HeaderSize+int(start):], reframe(fr))
	}
	for _, tc := range []struct {
		name   string
		damage func([]byte)
		want   error
	}{
		{"payload byte", func(b []byte) { b[HeaderSize+int(start)+6] ^= 0x01 }, ErrCorrupt},
		{"checksum byte", func(b []byte) { b[HeaderSize+int(ends[k])-1] ^= 0x80 }, ErrCorrupt},
		{"huge length", func(b []byte) { b[HeaderSize+int(start)+3] = 0x7f }, ErrCorrupt},
		{"undecodable payload", undecodable, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.trl")
			bad := bytes.Clone(data)
			tc.damage(bad)
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range k {
				rec, _, err := r.Next(ctx)
				if err != nil || !reflect.DeepEqual(rec, recs[i]) {
					t.Fatalf("record %d before the damage: %+v, %v", i, rec, err)
				}
			}
			_, end, err := r.Next(ctx)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("%s at %d:", path, start)) {
				t.Fatalf("Next at the damage: err %v, want %v naming %s at %d", err, tc.want, path, start)
			}
			if end != start || r.Pos() != start {
				t.Fatalf("Next moved past the damage to %d", end)
			}
			if _, _, _, _, err := r.NextFrame(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("NextFrame at the damage: err %v", err)
			}
			// The writer treats a failing frame as a torn tail and cuts there;
			// an undecodable but checksum-valid frame it refuses to touch.
			w, err := Create(path)
			if tc.name == "undecodable payload" {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("at %d:", start)) {
					t.Fatalf("Create over an undecodable frame: err %v", err)
				}
				if now, _ := os.ReadFile(path); !bytes.Equal(now, bad) {
					t.Fatalf("Create changed a trail it refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.LastCommit() != recs[2].LSN || w.Size() != ends[2] {
				t.Fatalf("Create: last commit %d size %d, want %d, %d", w.LastCommit(), w.Size(), recs[2].LSN, ends[2])
			}
		})
	}
}

// reframe fixes fr's checksum after a test changed its payload.
func reframe(fr []byte) []byte {
	n := len(fr) - 4
	binary.LittleEndian.PutUint32(fr[n:], crc32.Checksum(fr[:n], castagnoli))
	return fr
}

func TestReaderWaitsAtTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.trl")
	first := txn(0, 1)
	ends := writeTrail(t, path, first, 0)
	next := txn(1, 1)
	fr := frameOf(t, next[0])

	r, err := Open(path, ends[len(ends)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetPoll(time.Millisecond)
	wait := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		_, _, err := r.Next(ctx)
		return err
	}
	if err := wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next at the end: %v", err)
	}

	// A partial frame is waited for.
	appendFile(t, path, fr[:len(fr)/2])
	if _, _, ok, err := r.TryNext(); ok || err != nil {
		t.Fatalf("TryNext on a partial frame: ok %v err %v", ok, err)
	}
	if err := wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on a partial frame: %v", err)
	}
	appendFile(t, path, fr[len(fr)/2:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, end, err := r.Next(ctx)
	if err != nil || !reflect.DeepEqual(rec, next[0]) || end != ends[len(ends)-1]+Pos(len(fr)) {
		t.Fatalf("Next after the frame completed: %+v, %d, %v", rec, end, err)
	}

	// A failing frame at the very end may be mid-write: waited for too,
	// and an error once more data follows it.
	bad := frameOf(t, next[1])
	bad[len(bad)-1] ^= 0xff
	appendFile(t, path, bad)
	if _, _, ok, err := r.TryNext(); ok || err != nil {
		t.Fatalf("TryNext on a failing last frame: ok %v err %v", ok, err)
	}
	appendFile(t, path, frameOf(t, next[2]))
	if _, _, _, err := r.TryNext(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("at %d:", end)) {
		t.Fatalf("TryNext on a failing frame followed by data: %v", err)
	}

	// A writer's recovery cutting the trail below the reader is reported.
	if err := os.Truncate(path, int64(HeaderSize)+int64(ends[len(ends)-1])); err != nil {
		t.Fatal(err)
	}
	if err := wait(); !errors.Is(err, ErrCut) {
		t.Fatalf("Next past a cut trail: %v", err)
	}
}

func TestBadHeader(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		content  string
		createOK bool // a header cut short by a crash during creation
	}{
		{"empty", "", true},
		{"header prefix", Magic[:3], true},
		{"other file", "hello, world\n", false},
		{"other version", "RPLTRL02" + "\x00\x00\x00\x00", false},
		{"short garbage", "RPX", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(path, 0); !errors.Is(err, ErrNotTrail) || !strings.Contains(err.Error(), "trail "+path+": header") {
				t.Fatalf("Open: err %v, want ErrNotTrail naming the header", err)
			}
			w, err := Create(path)
			if !tc.createOK {
				if !errors.Is(err, ErrNotTrail) {
					t.Fatalf("Create: err %v, want ErrNotTrail", err)
				}
				if now, _ := os.ReadFile(path); string(now) != tc.content {
					t.Fatalf("Create changed a file that is not a trail")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			if now, _ := os.ReadFile(path); string(now) != Magic {
				t.Fatalf("Create left %q", now)
			}
			if _, err := Open(path, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := Open(filepath.Join(dir, "missing"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v", err)
	}
}

func TestFrameCopy(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.trl"), filepath.Join(dir, "dst.trl")
	var recs []Record
	for i := range 30 {
		recs = append(recs, txn(i, i%4)...)
	}
	recs = append(recs, sampleRecords()[6].rec, sampleRecords()[8].rec, sampleRecords()[10].rec)
	ends := writeTrail(t, src, recs, 10)

	r, err := Open(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var frames [][]byte
	var lastCommit uint64
	for i := range recs {
		frame, op, lsn, end, err := r.NextFrame(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if op != recs[i].Op || lsn != recs[i].LSN || end != ends[i] {
			t.Fatalf("frame %d: op %v lsn %d end %d; want %v %d %d", i, op, lsn, end, recs[i].Op, recs[i].LSN, ends[i])
		}
		if op == OpCommit {
			lastCommit = lsn
		}
		pos, err := w.AppendFrame(frame)
		if err != nil || pos != end {
			t.Fatalf("AppendFrame %d: %d, %v", i, pos, err)
		}
		frames = append(frames, frame)
	}
	if _, _, _, _, ok, err := r.TryNextFrame(); ok || err != nil {
		t.Fatalf("TryNextFrame at the end: ok %v err %v", ok, err)
	}
	if w.LastCommit() != lastCommit {
		t.Fatalf("LastCommit after AppendFrame: %d, want %d", w.LastCommit(), lastCommit)
	}

	good := frames[1]
	short := good[:len(good)-1]
	long := append(bytes.Clone(good), 0)
	flipCRC := bytes.Clone(good)
	flipCRC[len(flipCRC)-1] ^= 1
	flipPayload := bytes.Clone(good)
	flipPayload[5] ^= 1
	badOp := bytes.Clone(good)
	badOp[4] = 'X'
	reframe(badOp)
	for name, fr := range map[string][]byte{"empty": nil, "short": short, "long": long,
		"checksum": flipCRC, "payload": flipPayload, "undecodable": badOp} {
		if pos, err := w.AppendFrame(fr); !errors.Is(err, ErrCorrupt) || pos != w.Size() {
			t.Errorf("AppendFrame(%s): %d, %v; want ErrCorrupt", name, pos, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	a, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("copied trail differs: %d vs %d bytes", len(a), len(b))
	}
	// Frames are the caller's: reading on did not change those kept.
	if got := append([]byte(Magic), bytes.Join(frames, nil)...); !bytes.Equal(got, a) {
		t.Fatalf("kept frames changed under the caller")
	}
}

func TestClosedAndLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.trl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if canLock {
		if _, err := Create(path); !errors.Is(err, ErrLocked) {
			t.Fatalf("second Create: err %v, want ErrLocked", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(&Record{Op: OpBegin}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	r, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := r.TryNext(); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryNext after Close: %v", err)
	}
}

// benchRecord is a typical 5-column row.
var benchRecord = Record{Op: OpInsert, LSN: 0, XID: 123456, Schema: "public", Table: "orders",
	Columns: []string{"id", "customer_id", "amount", "status", "created_at"}, Key: []int{0},
	Values: []Value{val("1234567"), val("98765"), val("149.90"), val("pending"), val("2024-05-06 07:08:09.123456+00")}}

func BenchmarkAppend(b *testing.B) {
	w, err := Create(filepath.Join(b.TempDir(), "bench.trl"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.SetBytes(int64(len(frameOf(b, benchRecord))))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Append(&benchRecord); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.trl")
	w, err := Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if _, err := w.Append(&benchRecord); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := Open(path, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.SetBytes(int64(len(frameOf(b, benchRecord))))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, ok, err := r.TryNext(); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// TestFormatExample pins the bytes FORMAT.md shows.
func TestFormatExample(t *testing.T) {
	for _, tc := range []struct {
		rec  Record
		want string
	}{
		{Record{Op: OpBegin, LSN: 0x16B3790, XID: 770, Time: 1700000000123456789},
			"10000000 42 90efac0b 8206 aab4aed8c7bfce972f 66bfd86c"},
		{Record{Op: OpUpdate, XID: 770, Schema: "public", Table: "t", Columns: []string{"id", "v"}, Key: []int{0},
			Values: []Value{val("7"), null}, Old: []Value{val("6")}},
			"1f000000 5500820600 067075626c696301 74 02 026964000137 01760100 0100 01000136 734a70da"},
	} {
		want, err := hex.DecodeString(strings.ReplaceAll(tc.want, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := frameOf(t, tc.rec); !bytes.Equal(got, want) {
			t.Errorf("%v frame:\n got % x\nwant % x", tc.rec.Op, got, want)
		}
	}
}

// TestNewTrailHasItsHeaderAtOnce: a reader opening a trail the moment it
// is created finds a trail, never an empty file (a replicat starts beside
// its collector and may open the trail first).
func TestNewTrailHasItsHeaderAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.trail")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := Open(path, 0)
	if err != nil {
		t.Fatalf("open a new trail: %v", err)
	}
	r.Close()
	st, err := os.Stat(path)
	if err != nil || st.Size() != int64(HeaderSize) || st.Mode().Perm() != 0o644 {
		t.Errorf("new trail: %v, %v; want %d bytes, mode 0644", st, err, HeaderSize)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want only the trail (no temporary file left)", len(ents))
	}
}

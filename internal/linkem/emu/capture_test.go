package emu

import (
	"bytes"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/linkem"
	"replab/internal/linkem/pcap"
)

type pcapRecord struct {
	ts         time.Time
	incl, orig int
	data       []byte
}

// readPcap parses what pcap.Writer wrote (little-endian, nanoseconds).
func readPcap(t *testing.T, b []byte) (snap int, recs []pcapRecord) {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 24 || le.Uint32(b) != pcap.MagicNanos || le.Uint32(b[20:]) != pcap.LinkTypeRaw {
		t.Fatalf("not a nanosecond LINKTYPE_RAW pcap: %x", b[:min(len(b), 24)])
	}
	snap = int(le.Uint32(b[16:]))
	for b = b[24:]; len(b) > 0; {
		if len(b) < 16 {
			t.Fatalf("truncated record header (%d bytes)", len(b))
		}
		r := pcapRecord{
			ts:   time.Unix(int64(le.Uint32(b)), int64(le.Uint32(b[4:]))),
			incl: int(le.Uint32(b[8:])), orig: int(le.Uint32(b[12:])),
		}
		if len(b) < 16+r.incl {
			t.Fatalf("truncated record data")
		}
		r.data = b[16 : 16+r.incl]
		recs = append(recs, r)
		b = b[16+r.incl:]
	}
	return snap, recs
}

// TestCaptureRecordsDeliveredPacketsAtEgress: a capture of a->b holds the
// packets a->b delivered, in order, cut at the snap length, with wall-clock
// timestamps no earlier than the link's delay after they were sent; packets
// the link dropped and the other direction's are not in it.
func TestCaptureRecordsDeliveredPacketsAtEgress(t *testing.T) {
	delay := 5 * time.Millisecond
	e, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{Delay: delay}}}, 2)
	var buf bytes.Buffer
	c, err := e.StartCapture("a", "b", &buf, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartCapture("a", "b", &bytes.Buffer{}, 0); err == nil || !strings.Contains(err.Error(), "already being captured") {
		t.Errorf("second capture of a->b: got %v, want an error saying it is already being captured", err)
	}
	if _, err := e.StartCapture("a", "x", &bytes.Buffer{}, 0); err == nil {
		t.Error("capture of an unknown direction: want an error")
	}
	if _, err := e.StartCapture("b", "a", &bytes.Buffer{}, 10); err == nil {
		t.Error("snap length 10: want an error")
	}
	sent := time.Now()
	for i := range 5 {
		devs[0].in <- ipv4(addrA, addrB, byte(i), 100)
	}
	devs[1].in <- ipv4(addrB, addrA, 99, 100) // the other direction
	for range 5 {
		recv(t, devs[1], 10*time.Second)
	}
	recv(t, devs[0], 10*time.Second)
	if err := e.SetParams("a", "b", linkem.Params{Down: true}); err != nil {
		t.Fatal(err)
	}
	devs[0].in <- ipv4(addrA, addrB, 50, 100) // dropped: not recorded
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats()[0].Counters.DroppedOtherPackets == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := e.Stats()[0]; s.Capture == nil || s.Capture.Packets+s.Capture.DroppedRecords > 5 {
		t.Errorf("live stats of a->b: %+v, want a capture of at most 5 records", s.Capture)
	}
	st, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if st.Packets != 5 || st.DroppedRecords != 0 || st.SnapBytes != 64 {
		t.Errorf("stats %+v, want 5 packets, none dropped, snap 64", st)
	}
	if again, _ := c.Stop(); again != st {
		t.Errorf("second Stop: %+v, want %+v", again, st)
	}
	if e.Stats()[0].Capture != nil {
		t.Error("a stopped capture still shows in the direction's stats")
	}
	snap, recs := readPcap(t, buf.Bytes())
	if snap != 64 || len(recs) != 5 {
		t.Fatalf("snap %d, %d records: want 64 and 5", snap, len(recs))
	}
	for i, r := range recs {
		if r.incl != 64 || r.orig != 100 {
			t.Errorf("record %d: incl %d orig %d, want 64 and 100", i, r.incl, r.orig)
		}
		if r.data[20] != byte(i) || !bytes.Equal(r.data[12:16], addrA.AsSlice()) || !bytes.Equal(r.data[16:20], addrB.AsSlice()) {
			t.Errorf("record %d: %x, want packet %d from a to b", i, r.data[:21], i)
		}
		if r.ts.Before(sent.Add(delay)) {
			t.Errorf("record %d stamped %s after sending, before the %s delay", i, r.ts.Sub(sent), delay)
		}
		if r.ts.After(time.Now()) {
			t.Errorf("record %d stamped in the future", i)
		}
	}
	// The direction can be captured again.
	c2, err := e.StartCapture("a", "b", &bytes.Buffer{}, 0)
	if err != nil {
		t.Fatalf("capture after Stop: %v", err)
	}
	c2.Stop()
}

// blockingWriter blocks every Write until released: a disk that stalls.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestStalledCaptureDropsRecordsNotPackets: while the capture's writer is
// stuck, the link keeps delivering every packet and the capture counts
// the records it could not keep; every packet is either written or
// counted as dropped.
func TestStalledCaptureDropsRecordsNotPackets(t *testing.T) {
	e, devs := newTestEmu(t, []Link{{A: 0, B: 1}}, 2)
	w := &blockingWriter{release: make(chan struct{})}
	c, err := e.StartCapture("a", "b", w, pcap.MaxSnapLen)
	if err != nil {
		t.Fatal(err)
	}
	// More than the bufio buffer (256 KiB / 116 bytes per record) and the
	// record queue hold together.
	const n = captureRecords + 4000
	got := make(chan int)
	go func() {
		k := 0
		for k < n {
			select {
			case <-devs[1].out:
				k++
			case <-time.After(30 * time.Second):
				got <- k
				return
			}
		}
		got <- k
	}()
	for i := range n {
		devs[0].in <- ipv4(addrA, addrB, byte(i), 100)
	}
	if k := <-got; k != n {
		t.Fatalf("%d of %d packets delivered while the capture writer was stalled", k, n)
	}
	if d := c.Stats().DroppedRecords; d == 0 {
		t.Error("no records dropped although the writer was stalled")
	}
	close(w.release)
	st, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if st.Packets+st.DroppedRecords != n {
		t.Errorf("written %d + dropped %d, want %d", st.Packets, st.DroppedRecords, n)
	}
	_, recs := readPcap(t, w.buf.Bytes())
	if uint64(len(recs)) != st.Packets {
		t.Errorf("file has %d records, stats say %d", len(recs), st.Packets)
	}
}

// TestCloseStopsCaptures: closing the emulator flushes a running capture.
func TestCloseStopsCaptures(t *testing.T) {
	e, devs := newTestEmu(t, []Link{{A: 0, B: 1}}, 2)
	var buf bytes.Buffer
	c, err := e.StartCapture("b", "a", &buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	devs[1].in <- ipv4(addrB, addrA, 1, 300)
	recv(t, devs[0], 10*time.Second)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Stop()
	_, recs := readPcap(t, buf.Bytes())
	if st.Packets != 1 || len(recs) != 1 || recs[0].incl != pcap.DefaultSnapLen || recs[0].orig != 300 {
		t.Errorf("stats %+v, records %d: want 1 packet cut to %d of 300 bytes", st, len(recs), pcap.DefaultSnapLen)
	}
	if _, err := e.StartCapture("a", "b", &bytes.Buffer{}, 0); err == nil {
		t.Error("capture on a closed emulator: want an error")
	}
}

package pipeline_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"replab/internal/pipeline"
	"replab/internal/pipeline/trail"
)

// copyWithin bounds how long a test waits for the remote trail to catch up.
const copyWithin = 30 * time.Second

// trailInfo is what writeTestTrail wrote.
type trailInfo struct {
	size         trail.Pos
	transactions int64
	records      int64
}

// writeTestTrail writes n transactions of inserts, updates (some with an
// old key) and deletes, with repetitive (compressible) text, deterministic
// from seed.
func writeTestTrail(t *testing.T, path string, seed uint64, n int) trailInfo {
	t.Helper()
	w, err := trail.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rng := rand.New(rand.NewPCG(seed, 11))
	notes := []string{"plain", "it's quoted", "ünïcødé ✓", strings.Repeat("compressible text ", 20)}
	cols := []string{"id", "bal", "note"}
	var info trailInfo
	appendRec := func(r trail.Record) {
		t.Helper()
		if _, err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	lsn := uint64(0x1000000)
	for i := range n {
		xid := uint32(700 + i)
		ts := int64(1700000000000000000) + int64(i)*1e6
		lsn += 0x100
		appendRec(trail.Record{Op: trail.OpBegin, LSN: lsn, XID: xid, Time: ts})
		for range 1 + rng.IntN(8) {
			id := fmt.Sprint(rng.IntN(500))
			note := trail.Value{Text: notes[rng.IntN(len(notes))]}
			if rng.IntN(10) == 0 {
				note = trail.Value{Null: true}
			}
			row := []trail.Value{{Text: id}, {Text: fmt.Sprint(rng.IntN(100000))}, note}
			r := trail.Record{XID: xid, Schema: "public", Table: "acct", Columns: cols, Key: []int{0}, Values: row}
			switch rng.IntN(4) {
			case 0, 1:
				r.Op = trail.OpInsert
			case 2:
				r.Op = trail.OpUpdate
				if rng.IntN(3) == 0 {
					r.Old = []trail.Value{{Text: fmt.Sprint(rng.IntN(500))}}
				}
			case 3:
				r.Op, r.Columns, r.Values = trail.OpDelete, cols[:1], row[:1]
			}
			appendRec(r)
			info.records++
		}
		appendRec(trail.Record{Op: trail.OpCommit, LSN: lsn + 0x80, XID: xid, Time: ts})
		info.transactions++
	}
	end, _, err := w.Sync()
	if err != nil {
		t.Fatal(err)
	}
	info.size = end
	return info
}

// tapConn keeps a copy of what is written to the connection.
type tapConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *tapConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.out.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

// wire is everything the pumps dialed through it wrote, in dial order.
type wire struct {
	mu    sync.Mutex
	conns []*tapConn
}

func (w *wire) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &tapConn{Conn: c}
	w.mu.Lock()
	w.conns = append(w.conns, tc)
	w.mu.Unlock()
	return tc, nil
}

func (w *wire) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b []byte
	for _, c := range w.conns {
		c.mu.Lock()
		b = append(b, c.out.Bytes()...)
		c.mu.Unlock()
	}
	return b
}

// codecs counts the blocks of each codec in a plain pump's stream (one
// connection); a block cut short at the end is not counted.
func codecs(t *testing.T, stream []byte) map[byte]int {
	t.Helper()
	const magic = "RPLPUMP1"
	if !bytes.HasPrefix(stream, []byte(magic)) {
		t.Fatalf("the stream does not start with the pump's hello: % x", stream[:min(len(stream), 16)])
	}
	b := stream[len(magic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		t.Fatal("a bad hello in the stream")
	}
	b = b[k+int(n):]
	out := map[byte]int{}
	for len(b) >= 9 {
		sent := int(binary.LittleEndian.Uint32(b[4:]))
		if len(b) < 9+sent {
			break
		}
		out[b[8]]++
		b = b[9+sent:]
	}
	return out
}

// running is a pump or collector on a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// stopAndCompare stops a pump and its collector, and checks the remote
// trail is the local one.
func stopAndCompare(t *testing.T, pmp, col *running, local, remote string) {
	t.Helper()
	if err := pmp.stop(t); err != nil {
		t.Errorf("pump: %v", err)
	}
	if err := col.stop(t); err != nil {
		t.Errorf("collector: %v", err)
	}
	sameFiles(t, local, remote)
}

func run(t *testing.T, f func(ctx context.Context) error) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(copyWithin):
			t.Errorf("a pump or collector did not stop within %v", copyWithin)
		}
	})
	return r
}

// stop ends it and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for Cleanup
		return err
	case <-time.After(copyWithin):
		t.Fatalf("did not stop within %v", copyWithin)
		return nil
	}
}

// ended returns its error once it has returned by itself, within d.
func (r *running) ended(d time.Duration) (error, bool) {
	select {
	case err := <-r.done:
		r.done <- err
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// loopback is a collector's listener on 127.0.0.1.
func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// waitCopied waits until the collector holds the whole local trail and
// the pump has seen it acknowledged; a stage that ends first fails.
func waitCopied(t *testing.T, size trail.Pos, co *pipeline.Counters, pu *pipeline.PumpCounters, stages ...*running) {
	t.Helper()
	deadline := time.Now().Add(copyWithin)
	for co.Bytes.Load() != int64(size) || pu.Acked.Load() != int64(size) {
		for _, s := range stages {
			if err, ok := s.ended(0); ok {
				t.Fatalf("a stage ended early: %v", err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the collector holds %d of %d trail bytes, the pump saw %d acknowledged", copyWithin, co.Bytes.Load(), size, pu.Acked.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sameFiles fails unless the two files are byte for byte the same.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		i := 0
		for i < min(len(x), len(y)) && x[i] == y[i] {
			i++
		}
		t.Fatalf("%s (%d bytes) and %s (%d bytes) differ from offset %d", a, len(x), b, len(y), i)
	}
}

// TestPumpCodecs: a trail of inserts, updates and deletes goes over
// loopback with each codec, with and without TLS; the remote trail is a
// byte-for-byte copy, the compressing codecs shrink it, and the blocks on
// the wire carry the codec asked for (plain) or no plaintext at all (TLS).
func TestPumpCodecs(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "local.trail")
	info := writeTestTrail(t, local, 1, 600)
	files, err := pipeline.MakeTLS(filepath.Join(dir, "tls"), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		codec    string
		level    int
		tls      bool
		wantCode byte // the codec of the compressed blocks (plain only)
	}{
		{name: "none", wantCode: 0},
		{name: "deflate6", codec: "deflate", level: 6, wantCode: 1},
		{name: "zstd3", codec: "zstd", level: 3, wantCode: 2},
		{name: "zstd9", codec: "zstd", level: 9, wantCode: 2},
		{name: "zstd3+TLS", codec: "zstd", level: 3, tls: true},
		{name: "deflate6+TLS", codec: "", level: 6, tls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := filepath.Join(t.TempDir(), "remote.trail")
			ln := loopback(t)
			var co pipeline.Counters
			var pu pipeline.PumpCounters
			var w wire
			ccfg := pipeline.CollectorConfig{Trail: remote, SocketBuffer: 256 << 10}
			pcfg := pipeline.PumpConfig{Name: "t1", Trail: local, Addr: ln.Addr().String(), Codec: tc.codec, Compress: tc.level,
				FlushBytes: 16 << 10, SocketBuffer: 256 << 10, Dial: w.dial}
			if tc.tls {
				ccfg.TLS, pcfg.TLS = &files, &files
			}
			col := run(t, func(ctx context.Context) error { return pipeline.Collect(ctx, ln, ccfg, &co) })
			pmp := run(t, func(ctx context.Context) error { return pipeline.Pump(ctx, pcfg, &pu) })
			waitCopied(t, info.size, &co, &pu, col, pmp)
			stopAndCompare(t, pmp, col, local, remote)

			if n := co.Transactions.Load(); n != info.transactions {
				t.Errorf("collector counted %d transactions, want %d", n, info.transactions)
			}
			if n := co.Records.Load(); n != info.records {
				t.Errorf("collector counted %d records, want %d", n, info.records)
			}
			raw, sent, blocks := pu.RawBytes.Load(), pu.SentBytes.Load(), pu.Blocks.Load()
			if raw != int64(info.size) {
				t.Errorf("pump: %d raw bytes, want the trail's %d", raw, info.size)
			}
			if blocks < 2 {
				t.Errorf("pump: %d blocks, want several (16 KiB each)", blocks)
			}
			if tc.level > 0 {
				if sent >= raw {
					t.Errorf("pump %s: sent %d bytes for %d: no compression", tc.name, sent, raw)
				}
				if pu.CPUNs.Load() <= 0 {
					t.Errorf("pump %s: no compression time counted", tc.name)
				}
			} else if want := raw + 9*blocks; sent != want {
				t.Errorf("uncompressed: sent %d bytes, want %d (raw + a 9-byte header a block)", sent, want)
			}

			stream := w.bytes()
			if tc.tls {
				// Encrypted: neither the hello nor the trail's text shows.
				for _, s := range []string{"RPLPUMP1", "compressible text", "acct"} {
					if bytes.Contains(stream, []byte(s)) {
						t.Errorf("TLS: %q in plain on the wire", s)
					}
				}
				return
			}
			got := codecs(t, stream)
			if int64(got[tc.wantCode]) == 0 {
				t.Errorf("no blocks of codec %d on the wire: %v", tc.wantCode, got)
			}
			for c, n := range got {
				if c != 0 && c != tc.wantCode {
					t.Errorf("%d blocks of codec %d on the wire, want only %d (and 0)", n, c, tc.wantCode)
				}
			}
			t.Logf("%s: %d → %d bytes (%.2f×) in %d blocks, codecs %v", tc.name, raw, sent, float64(raw)/float64(sent), blocks, got)
		})
	}
}

// TestPumpCodecResumeZstd: a zstd pump stopped midway and started again (the
// collector restarted too) resumes where the remote trail ends.
func TestPumpCodecResumeZstd(t *testing.T) {
	dir := t.TempDir()
	local, remote := filepath.Join(dir, "local.trail"), filepath.Join(dir, "remote.trail")
	first := writeTestTrail(t, local, 2, 200)
	ln := loopback(t)
	var co pipeline.Counters
	var pu pipeline.PumpCounters
	pcfg := pipeline.PumpConfig{Name: "t1", Trail: local, Addr: ln.Addr().String(), Codec: "zstd", Compress: 1, FlushBytes: 8 << 10}
	col := run(t, func(ctx context.Context) error {
		return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote}, &co)
	})
	pmp := run(t, func(ctx context.Context) error { return pipeline.Pump(ctx, pcfg, &pu) })
	waitCopied(t, first.size, &co, &pu, col, pmp)
	if err := pmp.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := col.stop(t); err != nil {
		t.Fatal(err)
	}
	more := writeTestTrail(t, local, 3, 200) // appends to the same trail
	ln = loopback(t)
	pcfg.Addr = ln.Addr().String()
	var pu2 pipeline.PumpCounters
	col = run(t, func(ctx context.Context) error {
		return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote}, &co)
	})
	pmp = run(t, func(ctx context.Context) error { return pipeline.Pump(ctx, pcfg, &pu2) })
	waitCopied(t, more.size, &co, &pu2, col, pmp)
	if err := pmp.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := col.stop(t); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, local, remote)
	if got, want := pu2.RawBytes.Load(), int64(more.size-first.size); got != want {
		t.Errorf("the restarted pump sent %d trail bytes, want only the %d new ones", got, want)
	}
}

// TestPumpUnknownCodec: a codec name other than deflate or zstd is
// refused, naming the ones accepted.
func TestPumpUnknownCodec(t *testing.T) {
	for _, codec := range []string{"lz4", "ZSTD", "gzip"} {
		err := pipeline.Pump(context.Background(), pipeline.PumpConfig{Name: "t1", Trail: "unused", Addr: "127.0.0.1:1", Codec: codec, Compress: 3}, nil)
		if err == nil {
			t.Fatalf("codec %q accepted", codec)
		}
		for _, want := range []string{codec, "deflate", "zstd"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("codec %q: error %q does not name %q", codec, err, want)
			}
		}
	}
}

// TestPumpCodecJSON: a stage's configuration carries the codec and the
// TLS files.
func TestPumpCodecJSON(t *testing.T) {
	in := pipeline.PumpConfig{Name: "t1", Codec: "zstd", Compress: 3, TLS: &pipeline.TLSFiles{CA: "a", Cert: "b", Key: "c"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"codec":"zstd"`, `"tls":{"ca":"a","cert":"b","key":"c"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var out pipeline.PumpConfig
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Codec != in.Codec || out.TLS == nil || *out.TLS != *in.TLS {
		t.Errorf("round trip: %+v, want %+v", out, in)
	}
	b, _ = json.Marshal(pipeline.CollectorConfig{Trail: "r"})
	if strings.Contains(string(b), "tls") {
		t.Errorf("a collector without TLS: %s, want no tls key", b)
	}
}

// TestCollectorRefusesBadCodecBlocks: an unknown codec byte and a zstd block
// that decodes past its stated length each drop the connection without
// writing anything, and the collector goes on waiting.
func TestCollectorRefusesBadCodecBlocks(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.trail")
	ln := loopback(t)
	var co pipeline.Counters
	col := run(t, func(ctx context.Context) error {
		return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote}, &co)
	})

	// A valid frame to carry.
	src := filepath.Join(t.TempDir(), "src.trail")
	writeTestTrail(t, src, 4, 3)
	frames, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	frames = frames[trail.HeaderSize:]
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	packed := enc.EncodeAll(frames, nil)

	for _, tc := range []struct {
		name   string
		rawLen int
		codec  byte
		body   []byte
	}{
		{"unknown codec", len(frames), 9, frames},
		{"zstd past its length", len(frames) / 2, 2, packed},
		{"zstd garbage", len(frames), 2, []byte("not a zstd frame at all")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hello := binary.AppendUvarint([]byte("RPLPUMP1"), 2)
			hello = append(hello, "t1"...)
			if _, err := conn.Write(hello); err != nil {
				t.Fatal(err)
			}
			var b8 [8]byte
			if _, err := io.ReadFull(conn, b8[:]); err != nil {
				t.Fatal(err)
			}
			if pos := binary.LittleEndian.Uint64(b8[:]); pos != 0 {
				t.Fatalf("the collector resumes at %d, want 0 (nothing written)", pos)
			}
			var h [9]byte
			binary.LittleEndian.PutUint32(h[0:], uint32(tc.rawLen))
			binary.LittleEndian.PutUint32(h[4:], uint32(len(tc.body)))
			h[8] = tc.codec
			conn.Write(h[:])
			conn.Write(tc.body)
			conn.SetReadDeadline(time.Now().Add(copyWithin))
			n, err := io.ReadFull(conn, b8[:])
			if err == nil || n != 0 {
				t.Fatalf("the collector acknowledged a bad block (%d bytes read, %v)", n, err)
			}
			if n := co.Syncs.Load(); n != 0 {
				t.Errorf("the collector synced %d times for bad blocks", n)
			}
		})
	}
	if err, ok := col.ended(50 * time.Millisecond); ok {
		t.Fatalf("the collector ended after bad blocks: %v", err)
	}
	if err := col.stop(t); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(remote); err != nil || fi.Size() != int64(trail.HeaderSize) {
		t.Errorf("remote trail after bad blocks: %v, %v; want only its header", fi, err)
	}
}

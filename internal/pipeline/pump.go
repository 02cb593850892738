package pipeline

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"replab/internal/pipeline/trail"
)

// The pump and the collector speak a small protocol over one TCP
// connection (documented in docs/pipeline.md):
//
//	(with TLS configured, all of it inside one TLS 1.3 session)
//	pump → collector: hello: "RPLPUMP1", uvarint name length, name
//	collector → pump: uint64 LE: the remote trail's end (where to resume)
//	pump → collector: blocks: uint32 LE raw length, uint32 LE sent length,
//	                  byte codec (0 none, 1 deflate, 2 zstd), the sent
//	                  bytes (deflate: a raw RFC 1951 stream; zstd: one
//	                  zstd frame)
//	collector → pump: uint64 LE after each block made durable: the
//	                  remote trail's end
//
// A block holds whole trail frames, copied byte for byte, so the remote
// trail is a copy of the local one and positions mean the same in both:
// the collector's end is where the pump resumes after any restart.

const pumpMagic = "RPLPUMP1"

// Codec names a block's compression.
const (
	codecNone    = 0
	codecDeflate = 1
	codecZstd    = 2
)

// Codec names as PumpConfig.Codec takes them.
const (
	CodecDeflate = "deflate"
	CodecZstd    = "zstd"
)

// maxBlock bounds a block's raw and sent size (a guard against garbage).
const maxBlock = 64 << 20

// PumpConfig configures a pump.
type PumpConfig struct {
	Name  string // names the pump to the collector (and in errors)
	Trail string // the local trail to ship
	Addr  string // the collector's address
	// Compress is the compression level (1–9); 0 sends blocks as they
	// are (GoldenGate's COMPRESS off).
	Compress int
	// Codec compresses blocks: "" or "deflate" (what gzip uses, the
	// default) or "zstd" (level 1–9 mapped by zstd.EncoderLevelFromZstd).
	Codec string `json:"codec"`
	// CompressMin: blocks smaller than this are sent uncompressed
	// (GoldenGate's COMPRESSTHRESHOLD; default 512 bytes).
	CompressMin int
	// FlushBytes sends a block once it holds this many bytes (GoldenGate's
	// TCPFLUSHBYTES; default 65519 bytes, GoldenGate's default).
	FlushBytes int
	// FlushEvery sends what is gathered after this long even if below
	// FlushBytes, when the trail has nothing more for now (default 0: at
	// once).
	FlushEvery time.Duration
	// SocketBuffer sets SO_SNDBUF (and the collector's SO_RCVBUF is its
	// own option); 0 leaves the kernel's default and autotuning.
	SocketBuffer int
	// TLS, when set, encrypts the connection (GoldenGate's ENCRYPT): the
	// collector's certificate must verify against TLS.CA for the host of
	// Addr.
	TLS *TLSFiles `json:"tls,omitempty"`
	// Dial, when set, opens the connection (a lab site's dialer).
	Dial DialFunc `json:"-"`
}

// PumpCounters are Counters plus what only a pump has.
type PumpCounters struct {
	Counters
	SentBytes atomic.Int64 // bytes written to the socket (after compression)
	RawBytes  atomic.Int64 // trail bytes those carried
	Blocks    atomic.Int64
	Acked     atomic.Int64 // the collector's durable end (a trail position)
	CPUNs     atomic.Int64 // time spent compressing
}

// Pump ships the trail to a collector until ctx ends (it then returns nil)
// or the connection fails.
func Pump(ctx context.Context, cfg PumpConfig, c *PumpCounters) error {
	if c == nil {
		c = new(PumpCounters)
	}
	if cfg.FlushBytes <= 0 {
		cfg.FlushBytes = 65519
	}
	if cfg.CompressMin <= 0 {
		cfg.CompressMin = 512
	}
	if cfg.Compress < 0 || cfg.Compress > 9 {
		return fmt.Errorf("pump %s: compression level %d: want 0 (off) to 9", cfg.Name, cfg.Compress)
	}
	switch cfg.Codec {
	case "", CodecDeflate, CodecZstd:
	default:
		return fmt.Errorf("pump %s: codec %q: want %q (the default) or %q", cfg.Name, cfg.Codec, CodecDeflate, CodecZstd)
	}
	var tlsConf *tls.Config
	if cfg.TLS != nil {
		var err error
		if tlsConf, err = cfg.TLS.clientConfig(cfg.Addr); err != nil {
			return fmt.Errorf("pump %s: %w", cfg.Name, err)
		}
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tcp, err := dial(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("pump %s: connect to the collector at %s: %w", cfg.Name, cfg.Addr, err)
	}
	// Closing the socket (not the TLS session) also ends a handshake or a
	// read in flight.
	defer tcp.Close()
	if tc, ok := tcp.(*net.TCPConn); ok && cfg.SocketBuffer > 0 {
		if err := tc.SetWriteBuffer(cfg.SocketBuffer); err != nil {
			return fmt.Errorf("pump %s: socket buffer: %w", cfg.Name, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { tcp.Close() })
	defer stop()
	conn := tcp
	if tlsConf != nil {
		tc := tls.Client(tcp, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if closedByPeer(err) {
				// A plain collector drops a TLS hello without a word.
				err = fmt.Errorf("the collector closed the connection (does it use TLS?): %w", err)
			}
			return fmt.Errorf("pump %s: TLS handshake with the collector at %s: %w", cfg.Name, cfg.Addr, err)
		}
		conn = tc
	}

	hello := binary.AppendUvarint([]byte(pumpMagic), uint64(len(cfg.Name)))
	hello = append(hello, cfg.Name...)
	if _, err := conn.Write(hello); err != nil {
		return pumpErr(ctx, cfg, "hello", err)
	}
	var b8 [8]byte
	if _, err := io.ReadFull(conn, b8[:]); err != nil {
		if tlsConf == nil && closedByPeer(err) {
			// A TLS collector drops a plain hello without a word.
			err = fmt.Errorf("the collector closed the connection (does it want TLS?): %w", err)
		}
		return pumpErr(ctx, cfg, "read the collector's position", err)
	}
	from := trail.Pos(binary.LittleEndian.Uint64(b8[:]))
	c.Acked.Store(int64(from))
	r, err := openTrail(ctx, cfg.Trail, from)
	if err != nil {
		return stopped(ctx, err)
	}
	defer r.Close()

	// Acknowledgements arrive on their own goroutine so that sending never
	// waits for the collector's fsync.
	ackErr := make(chan error, 1)
	go func() {
		var b [8]byte
		for {
			if _, err := io.ReadFull(conn, b[:]); err != nil {
				ackErr <- err
				return
			}
			c.Acked.Store(int64(binary.LittleEndian.Uint64(b[:])))
		}
	}()

	var raw, out bytes.Buffer
	var zw *flate.Writer
	var zenc *zstd.Encoder
	var zbuf []byte
	if cfg.Compress > 0 {
		if cfg.Codec == CodecZstd {
			// EncodeAll on one goroutine: no encoder goroutines to leak.
			zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(cfg.Compress)), zstd.WithEncoderConcurrency(1))
			if err != nil {
				return fmt.Errorf("pump %s: zstd: %w", cfg.Name, err)
			}
			defer zenc.Close()
		} else {
			zw, _ = flate.NewWriter(&out, cfg.Compress) // the level was checked
		}
	}
	w := bufio.NewWriterSize(conn, 64<<10)
	var commitLSN uint64
	var txs, recs int64
	send := func() error {
		if raw.Len() == 0 {
			return nil
		}
		codec, body := byte(codecNone), raw.Bytes()
		if (zw != nil || zenc != nil) && raw.Len() >= cfg.CompressMin {
			start := time.Now()
			var packed []byte
			var pc byte
			if zenc != nil {
				zbuf = zenc.EncodeAll(raw.Bytes(), zbuf[:0])
				packed, pc = zbuf, codecZstd
			} else {
				out.Reset()
				zw.Reset(&out)
				zw.Write(raw.Bytes()) // writes to a bytes.Buffer do not fail
				zw.Close()
				packed, pc = out.Bytes(), codecDeflate
			}
			c.CPUNs.Add(int64(time.Since(start)))
			// Incompressible data goes as it is.
			if len(packed) < raw.Len() {
				codec, body = pc, packed
			}
		}
		var h [9]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(raw.Len()))
		binary.LittleEndian.PutUint32(h[4:], uint32(len(body)))
		h[8] = codec
		w.Write(h[:])
		w.Write(body)
		if err := w.Flush(); err != nil {
			return err
		}
		c.RawBytes.Add(int64(raw.Len()))
		c.SentBytes.Add(int64(len(h) + len(body)))
		c.Blocks.Add(1)
		c.Bytes.Store(int64(r.Pos()))
		c.Transactions.Add(txs)
		c.Records.Add(recs)
		txs, recs = 0, 0
		if commitLSN > 0 {
			c.Position.Store(commitLSN)
		}
		raw.Reset()
		return nil
	}
	var gathered time.Time
	for {
		select {
		case err := <-ackErr:
			return pumpErr(ctx, cfg, "read an acknowledgement", err)
		default:
		}
		frame, op, lsn, _, ok, err := r.TryNextFrame()
		if err != nil {
			return err
		}
		if !ok {
			// Nothing more now: send what is gathered once FlushEvery has
			// passed, then wait for the trail to grow.
			if raw.Len() > 0 && time.Since(gathered) >= cfg.FlushEvery {
				if err := send(); err != nil {
					return pumpErr(ctx, cfg, "send", err)
				}
				continue
			}
			wait := time.Millisecond
			if raw.Len() > 0 {
				wait = min(wait, cfg.FlushEvery-time.Since(gathered))
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-ackErr:
				return pumpErr(ctx, cfg, "read an acknowledgement", err)
			case <-time.After(max(wait, 0)):
			}
			continue
		}
		if raw.Len() == 0 {
			gathered = time.Now()
		}
		raw.Write(frame)
		switch op {
		case trail.OpCommit:
			txs++
			commitLSN = lsn
		case trail.OpInsert, trail.OpUpdate, trail.OpDelete:
			recs++
		}
		if raw.Len() >= cfg.FlushBytes {
			if err := send(); err != nil {
				return pumpErr(ctx, cfg, "send", err)
			}
		}
	}
}

// closedByPeer says whether err is the peer hanging up.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func pumpErr(ctx context.Context, cfg PumpConfig, what string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("pump %s: %s (collector %s): %w", cfg.Name, what, cfg.Addr, err)
}

// CollectorConfig configures a collector.
type CollectorConfig struct {
	// Trail is the remote trail's path, written in the collector's site.
	Trail string
	// SocketBuffer sets SO_RCVBUF on accepted connections; 0 leaves the
	// kernel's default and autotuning.
	SocketBuffer int
	// TLS, when set, makes every pump connect with TLS, presenting
	// TLS.Cert and TLS.Key (TLS.CA is the pumps' to check them).
	TLS *TLSFiles `json:"tls,omitempty"`
}

// Collect accepts one pump at a time on l and writes what it ships to the
// remote trail, until ctx ends (it then returns nil). A pump that goes
// away is waited for again: it resumes where the remote trail ends.
func Collect(ctx context.Context, l net.Listener, cfg CollectorConfig, c *Counters) error {
	if c == nil {
		c = new(Counters)
	}
	var tlsConf *tls.Config
	if cfg.TLS != nil {
		var err error
		if tlsConf, err = cfg.TLS.serverConfig(); err != nil {
			return fmt.Errorf("collector: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("collector: accept: %w", err)
		}
		if err := collectOne(ctx, conn, tlsConf, cfg, c); err != nil && ctx.Err() == nil {
			// The pump's connection ended; the trail is consistent, so
			// wait for the pump to come back. Anything else is fatal.
			var te *trailError
			if errors.As(err, &te) {
				return err
			}
		}
	}
}

// trailError marks a failure of the remote trail itself (not of the
// connection).
type trailError struct{ err error }

func (e *trailError) Error() string { return e.err.Error() }
func (e *trailError) Unwrap() error { return e.err }

func collectOne(ctx context.Context, tcp net.Conn, tlsConf *tls.Config, cfg CollectorConfig, c *Counters) error {
	defer tcp.Close()
	stop := context.AfterFunc(ctx, func() { tcp.Close() })
	defer stop()
	if tc, ok := tcp.(*net.TCPConn); ok && cfg.SocketBuffer > 0 {
		tc.SetReadBuffer(cfg.SocketBuffer)
	}
	conn := tcp
	if tlsConf != nil {
		tc := tls.Server(tcp, tlsConf)
		// Bounded: one pump at a time, so a silent peer must not hold the
		// collector.
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeWithin)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return fmt.Errorf("collector: TLS handshake with %s: %w", tcp.RemoteAddr(), err)
		}
		conn = tc
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	magic := make([]byte, len(pumpMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return err
	}
	if string(magic) != pumpMagic {
		return fmt.Errorf("collector: %s is not a replab pump", conn.RemoteAddr())
	}
	n, err := binary.ReadUvarint(br)
	if err != nil || n > 1024 {
		return fmt.Errorf("collector: bad hello from %s", conn.RemoteAddr())
	}
	if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
		return err
	}
	// Reopening recovers the trail: a torn or unfinished transaction at
	// its end is cut, and the pump resends it.
	w, err := trail.Create(cfg.Trail)
	if err != nil {
		return &trailError{err}
	}
	defer w.Close()
	var b8 [8]byte
	binary.LittleEndian.PutUint64(b8[:], uint64(w.Size()))
	if _, err := conn.Write(b8[:]); err != nil {
		return err
	}
	var raw []byte
	var h [9]byte
	var zr io.ReadCloser
	var zdec *zstd.Decoder
	defer func() {
		if zdec != nil {
			zdec.Close()
		}
	}()
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return err
		}
		rawLen, sentLen := binary.LittleEndian.Uint32(h[0:]), binary.LittleEndian.Uint32(h[4:])
		if rawLen > maxBlock || sentLen > maxBlock {
			return fmt.Errorf("collector: a block of %d bytes: not a pump's", rawLen)
		}
		body := make([]byte, sentLen)
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		switch h[8] {
		case codecNone:
			raw = body
		case codecDeflate:
			if zr == nil {
				zr = flate.NewReader(bytes.NewReader(body))
			} else {
				zr.(flate.Resetter).Reset(bytes.NewReader(body), nil)
			}
			raw = raw[:0]
			buf := bytes.NewBuffer(raw)
			// One byte past rawLen is enough to see a lying block.
			if _, err := io.Copy(buf, io.LimitReader(zr, int64(rawLen)+1)); err != nil {
				return fmt.Errorf("collector: inflate a block: %w", err)
			}
			raw = buf.Bytes()
		case codecZstd:
			if zdec == nil {
				zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBlock), zstd.WithDecodeAllCapLimit(true))
				if err != nil {
					return fmt.Errorf("collector: zstd: %w", err)
				}
			}
			// The cap limit stops a block from decoding past rawLen.
			dst := slices.Grow(raw[:0], int(rawLen))[:0:rawLen]
			if raw, err = zdec.DecodeAll(body, dst); err != nil {
				return fmt.Errorf("collector: zstd-decode a block: %w", err)
			}
		default:
			return fmt.Errorf("collector: unknown codec %d", h[8])
		}
		if len(raw) != int(rawLen) {
			return fmt.Errorf("collector: a block inflated to %d bytes, the pump said %d", len(raw), rawLen)
		}
		for len(raw) > 0 {
			if len(raw) < 4 {
				return errors.New("collector: a block ends inside a frame")
			}
			fl := 4 + int(binary.LittleEndian.Uint32(raw)) + 4
			if fl > len(raw) {
				return errors.New("collector: a block ends inside a frame")
			}
			if _, err := w.AppendFrame(raw[:fl]); err != nil {
				return &trailError{err}
			}
			switch trail.Op(raw[4]) { // a payload starts with its op
			case trail.OpCommit:
				c.Transactions.Add(1)
			case trail.OpInsert, trail.OpUpdate, trail.OpDelete:
				c.Records.Add(1)
			}
			raw = raw[fl:]
		}
		end, commit, err := w.Sync()
		if err != nil {
			return &trailError{err}
		}
		c.Syncs.Add(1)
		c.Bytes.Store(int64(end))
		if commit > 0 {
			c.Position.Store(commit)
		}
		binary.LittleEndian.PutUint64(b8[:], uint64(end))
		if _, err := conn.Write(b8[:]); err != nil {
			return err
		}
	}
}

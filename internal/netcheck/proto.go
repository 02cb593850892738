package netcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// Wire protocol (all integers big-endian).
//
// TCP: every connection starts with a request: tcpMagic, protoVersion, an op
// byte and the op's fields. Every message from the server starts with a
// status byte; statusErr is followed by a uint16 length and a message.
//
//	opThroughput  dir u8, warmup_ns i64, duration_ns i64 -> token u64
//	opData        token u64 (the bulk stream of that throughput session)
//	opLoss        n u32, size u32, pps f64 -> token u64, then commands:
//	              cmdPoll -> received u32;  cmdReport -> bitmap ((n+7)/8 bytes)
//
// A throughput session has a control connection (opThroughput) and a data
// connection (opData). The receiver measures; upload: the server sends
// bytes i64, window_ns i64 on control. Download: the client sends cmdStop on
// control, the server answers retrans u32, rtt_us u32, min_rtt_us u32.
//
// UDP: udpMagic, a kind byte, then
//
//	udpEcho  nonce u64, seq u32, sent_ns i64 (echoed back unchanged)
//	udpLoss  token u64, seq u32, padding up to the requested size
const (
	tcpMagic     = "RLNC"
	udpMagic     = "RLNU"
	protoVersion = 1

	opThroughput byte = 'T'
	opData       byte = 'D'
	opLoss       byte = 'L'

	cmdStop   byte = 'S'
	cmdPoll   byte = 'P'
	cmdReport byte = 'R'

	statusOK  byte = 0
	statusErr byte = 1

	udpEcho byte = 'E'
	udpLoss byte = 'L'

	echoLen       = 4 + 1 + 8 + 4 + 8
	lossHeaderLen = 4 + 1 + 8 + 4

	// MinLossSize and MaxLossSize bound the UDP payload size of Loss.
	MinLossSize = lossHeaderLen
	MaxLossSize = 65000
	// MaxLossPackets bounds n of Loss (the server keeps one bit per packet).
	MaxLossPackets = 1 << 24
)

func request(op byte) []byte {
	return append([]byte(tcpMagic), protoVersion, op)
}

func readRequest(r io.Reader) (op byte, err error) {
	var h [6]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, fmt.Errorf("read request: %w", err)
	}
	if string(h[:4]) != tcpMagic || h[4] != protoVersion {
		return 0, errors.New("not a netcheck request (bad magic or version)")
	}
	return h[5], nil
}

func okMsg(payload ...[]byte) []byte {
	b := []byte{statusOK}
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

func errMsg(msg string) []byte {
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	b := []byte{statusErr}
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// readReply reads one server message with a payload of n bytes.
func readReply(r io.Reader, n int) ([]byte, error) {
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return nil, err
	}
	switch st[0] {
	case statusOK:
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return b, nil
	case statusErr:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, err
		}
		msg := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(r, msg); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("server: %s", msg)
	}
	return nil, fmt.Errorf("bad reply status %d", st[0])
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// bulkPayload is what bulk streams carry: pseudo-random, so that nothing on
// the path can compress it.
var bulkPayload = sync.OnceValue(func() []byte {
	b := make([]byte, 256<<10)
	_, _ = rand.NewChaCha8([32]byte{'r', 'e', 'p', 'l', 'a', 'b'}).Read(b)
	return b
})

// bound is the time budget of one operation: its context and a hard
// deadline (never later than the context's). Deadlines are set through it so
// that a cancellation arriving at any moment is never overwritten.
type bound struct {
	ctx  context.Context
	hard time.Time
}

func newBound(ctx context.Context, budget time.Duration) bound {
	hard := time.Now().Add(budget)
	if d, ok := ctx.Deadline(); ok && d.Before(hard) {
		hard = d
	}
	return bound{ctx: ctx, hard: hard}
}

func (b bound) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(b.hard) {
		return b.hard
	}
	return t
}

func (b bound) setDeadline(c net.Conn, t time.Time) error {
	_ = c.SetDeadline(b.clamp(t))
	return b.ctx.Err()
}

func (b bound) setReadDeadline(c net.Conn, t time.Time) error {
	_ = c.SetReadDeadline(b.clamp(t))
	return b.ctx.Err()
}

// err explains a failure: the context's error when it is done, a timeout
// when the hard deadline passed, err otherwise.
func (b bound) err(err error) error {
	if cerr := b.ctx.Err(); cerr != nil {
		return cerr
	}
	if d, ok := b.ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(b.hard) {
		return fmt.Errorf("gave up at the time limit: %w", err)
	}
	return err
}

// watch makes every conn's pending and future I/O fail at once when ctx is
// done. The returned function stops watching.
func watch(ctx context.Context, conns ...net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		for _, c := range conns {
			_ = c.SetDeadline(time.Now())
		}
	})
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// sleepUntil waits until t or until ctx is done.
func sleepUntil(ctx context.Context, timer *time.Timer, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		timer.Stop()
		return ctx.Err()
	}
}

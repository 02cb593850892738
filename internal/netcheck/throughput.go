package netcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// Throughput sends a bulk TCP stream between ns and the server at srv for
// warmup+d and measures goodput at the receiving side over the last d (the
// warmup, e.g. slow start, is excluded; the window opens warmup after the
// first byte arrives). dir Upload sends from ns to the server, Download from
// the server to ns, so both directions of a link can be measured from one
// side. The call lasts about warmup + d + a few round trips; for Download
// add the time the link needs to drain the queue the stream built up, which
// the sender's statistics wait behind. A context deadline sooner than
// warmup + d fails at once with context.DeadlineExceeded.
func Throughput(ctx context.Context, ns Netns, srv netip.AddrPort, dir Direction, warmup, d time.Duration) (ThroughputResult, error) {
	res, err := throughput(ctx, ns, srv, dir, warmup, d)
	if err != nil {
		return ThroughputResult{}, fmt.Errorf("throughput %s to %s: %w", dir, srv, err)
	}
	return res, nil
}

func throughput(ctx context.Context, ns Netns, srv netip.AddrPort, dir Direction, warmup, d time.Duration) (ThroughputResult, error) {
	if err := checkWindow(dir, warmup, d); err != nil {
		return ThroughputResult{}, err
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < warmup+d {
		return ThroughputResult{}, fmt.Errorf("context ends in %s, before warmup+duration %s: %w",
			time.Until(dl).Round(time.Millisecond), warmup+d, context.DeadlineExceeded)
	}
	b := newBound(ctx, setupTimeout+warmup+d+sessionSlack)

	req := request(opThroughput)
	req = append(req, byte(dir))
	req = binary.BigEndian.AppendUint64(req, uint64(warmup))
	req = binary.BigEndian.AppendUint64(req, uint64(d))
	ctrl, reply, err := openSession(b, ns, srv, req, 8)
	if err != nil {
		return ThroughputResult{}, err
	}
	defer ctrl.Close()
	stopCtrl := watch(ctx, ctrl)
	defer stopCtrl()

	data, err := dialTCP(b, ns, srv)
	if err != nil {
		return ThroughputResult{}, fmt.Errorf("data connection: %w", err)
	}
	defer discard(data)
	stopData := watch(ctx, data)
	defer stopData()
	if err := b.setDeadline(data, b.hard); err != nil {
		return ThroughputResult{}, err
	}
	if err := b.setDeadline(ctrl, b.hard); err != nil {
		return ThroughputResult{}, err
	}
	if _, err := data.Write(append(request(opData), reply...)); err != nil {
		return ThroughputResult{}, b.err(fmt.Errorf("data connection: %w", err))
	}

	res := ThroughputResult{Direction: dir}
	var st tcpStats
	if dir == Upload {
		sendErr := make(chan error, 1)
		go func() { sendErr <- sendBulk(data) }()
		m, rerr := readReply(ctrl, 16)
		var ierr error
		if rerr == nil {
			st, ierr = readTCPStats(data)
		}
		discard(data)
		werr := <-sendErr
		if rerr != nil {
			if ctx.Err() == nil && werr != nil && errors.Is(rerr, io.EOF) {
				rerr = fmt.Errorf("%w (send: %v)", rerr, werr)
			}
			return ThroughputResult{}, b.err(fmt.Errorf("wait for result: %w", rerr))
		}
		if ierr != nil {
			return ThroughputResult{}, ierr
		}
		res.Bytes = int64(binary.BigEndian.Uint64(m[0:8]))
		res.Seconds = time.Duration(binary.BigEndian.Uint64(m[8:16])).Seconds()
	} else {
		n, window, err := receiveWindow(b, data, warmup, d)
		if err != nil {
			return ThroughputResult{}, fmt.Errorf("receive: %w", err)
		}
		res.Bytes, res.Seconds = n, window.Seconds()
		// Stop first so that the sender reads its TCP_INFO on a live socket,
		// then drop the rest of the stream.
		_, err = ctrl.Write([]byte{cmdStop})
		discard(data)
		if err != nil {
			return ThroughputResult{}, b.err(fmt.Errorf("send stop: %w", err))
		}
		m, err := readReply(ctrl, 12)
		if err != nil {
			return ThroughputResult{}, b.err(fmt.Errorf("wait for sender statistics: %w", err))
		}
		st = tcpStats{
			Retrans:  binary.BigEndian.Uint32(m[0:4]),
			RTTUs:    binary.BigEndian.Uint32(m[4:8]),
			MinRTTUs: binary.BigEndian.Uint32(m[8:12]),
		}
	}
	if res.Seconds > 0 {
		res.GoodputBps = float64(res.Bytes) * 8 / res.Seconds
	}
	res.Retransmits = st.Retrans
	res.KernelRTTMs = float64(st.RTTUs) / 1e3
	res.KernelMinRTTMs = float64(st.MinRTTUs) / 1e3
	return res, nil
}

// dialTCP connects to srv from inside ns.
func dialTCP(b bound, ns Netns, srv netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Deadline: b.clamp(time.Now().Add(setupTimeout))}
		var err error
		c, err = d.DialContext(b.ctx, "tcp", srv.String())
		return err
	})
	if err != nil {
		return nil, b.err(err)
	}
	return c, nil
}

// openSession connects a control connection, sends req and reads an OK
// reply of n bytes.
func openSession(b bound, ns Netns, srv netip.AddrPort, req []byte, n int) (net.Conn, []byte, error) {
	c, err := dialTCP(b, ns, srv)
	if err != nil {
		return nil, nil, err
	}
	stop := watch(b.ctx, c)
	defer stop()
	fail := func(err error) (net.Conn, []byte, error) {
		_ = c.Close()
		return nil, nil, b.err(fmt.Errorf("open session: %w", err))
	}
	if err := b.setDeadline(c, time.Now().Add(setupTimeout)); err != nil {
		return fail(err)
	}
	if _, err := c.Write(req); err != nil {
		return fail(err)
	}
	reply, err := readReply(c, n)
	if err != nil {
		return fail(err)
	}
	return c, reply, nil
}

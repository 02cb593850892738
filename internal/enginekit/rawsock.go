package enginekit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A lag watcher polls every millisecond from a goroutine locked to its
// thread. Parked on Go's netpoller for every reply, it is handed between
// OS threads on each wake-up (tens of µs of CPU a poll on 2 cores); a
// blocking write and read on its own thread cost a fraction. These
// helpers turn a connection into such a socket.

// SockTimeout bounds one blocking read or write so that a cancelled
// context is noticed while a server is slow (or paused) to answer.
const SockTimeout = 50 * time.Millisecond

// BlockingSocket returns a duplicate of conn's socket, out of Go's
// netpoller and in blocking mode, whose reads and writes give up after
// SockTimeout (EAGAIN). The caller closes conn when it no longer needs it
// (the duplicate keeps the socket open) and the descriptor with
// unix.Close.
func BlockingSocket(conn net.Conn) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("connection %T has no file descriptor", conn)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = unix.Dup(int(f)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	tv := unix.NsecToTimeval(int64(SockTimeout))
	for _, step := range []func() error{
		func() error { return unix.SetNonblock(fd, false) },
		func() error { return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) },
		func() error { return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv) },
	} {
		if err := step(); err != nil {
			_ = unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// SockWrite writes all of b to a socket from BlockingSocket.
func SockWrite(ctx context.Context, fd int, b []byte) error {
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		case err != nil:
			return fmt.Errorf("write: %w", err)
		}
		off += n
	}
	return nil
}

// SockRead reads into b from a socket from BlockingSocket, blocking until
// something is there.
func SockRead(ctx context.Context, fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if ctx.Err() != nil {
				return 0, ctx.Err() // the reply is still due: the caller closes the connection
			}
			continue
		case err != nil:
			return 0, fmt.Errorf("read: %w", err)
		case n == 0:
			return 0, errors.New("server closed the connection")
		}
		return n, nil
	}
}

package emu

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// filer is a device backed by a file descriptor (tun.NativeTun): its
// reader can wait for packets in the kernel itself instead of through Go's
// network poller.
type filer interface{ File() *os.File }

// readWaiter blocks a reader's own thread in ppoll until its device has a
// packet or the emulator stops. A packet then reaches the reader in one
// thread wake-up, where the network poller costs two (the poller's thread,
// then the reader goroutine's) plus the Go scheduler's search for a P, and
// the poller is left to the rest of the process.
type readWaiter struct {
	fds [2]unix.PollFd // the device, then the emulator's stop eventfd
}

// newReadWaiter returns a waiter for dev, or nil when dev has no file
// descriptor (a test device): its reader then uses Go's poller.
func newReadWaiter(dev Device, stopFd int) (*readWaiter, error) {
	f, ok := dev.(filer)
	if !ok || stopFd < 0 {
		return nil, nil
	}
	raw, err := f.File().SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("device descriptor: %w", err)
	}
	fd := -1
	if err := raw.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return nil, fmt.Errorf("device descriptor: %w", err)
	}
	return &readWaiter{fds: [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stopFd), Events: unix.POLLIN}}}, nil
}

// wait returns true when the device is readable (or in error: the read
// reports it), false when the emulator is stopping. The descriptor stays
// valid while it waits: Close signals the stop eventfd before it closes
// the devices, so a wait on a closed (or reused) number returns false.
func (w *readWaiter) wait() bool {
	for {
		w.fds[0].Revents, w.fds[1].Revents = 0, 0
		_, err := unix.Ppoll(w.fds[:], nil, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || w.fds[1].Revents != 0 {
			return false
		}
		if w.fds[0].Revents != 0 {
			return true
		}
	}
}

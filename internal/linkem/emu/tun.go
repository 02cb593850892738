package emu

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// tunOffloads are the offloads the emulator takes from the kernel:
// checksums left to the receiver and TCP/IPv4 segmentation, so a sending
// TCP hands over super-packets of up to 64 KiB and a receiving one gets
// them whole. (No IPv6: sites are IPv4 only. No UDP segmentation: the
// kernel cuts UDP GSO into datagrams before the device.)
const tunOffloads = unix.TUN_F_CSUM | unix.TUN_F_TSO4

// tunDev is a TUN device with IFF_VNET_HDR and tunOffloads, read and
// written frame by frame (one system call each, as the device requires)
// through Go's poller: Read takes every frame that is ready after one
// wake-up, Write writes a batch in one pass, each frame from its pieces
// (writev) without copying them together.
type tunDev struct {
	f  *os.File
	rc syscall.RawConn
}

// OpenTUN creates TUN device name in the calling thread's network
// namespace. The caller must be on a thread locked into the target
// namespace; the device keeps working from any thread afterwards.
func OpenTUN(name string) (Device, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("open /dev/net/tun: %w (load the tun module: modprobe tun)", err)
		}
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create tun %s: %w", name, err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: TCP segmentation offload: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun:"+name) // non-blocking: pollable
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tun %s: %w", name, err)
	}
	return &tunDev{f: f, rc: rc}, nil
}

func (t *tunDev) Read(bufs [][]byte, sizes []int) (int, error) {
	n := 0
	var rerr error
	err := t.rc.Read(func(fd uintptr) bool {
		for n < len(bufs) {
			m, err := unix.Read(int(fd), bufs[n])
			switch {
			case err == nil:
				sizes[n] = m
				n++
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return n > 0 // nothing yet: wait for the poller
			default:
				rerr = err
				return true
			}
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	if n > 0 {
		return n, nil // an error comes back on the next call
	}
	if errors.Is(err, unix.EBADFD) {
		err = os.ErrClosed
	}
	return 0, err
}

func (t *tunDev) Write(frames [][][]byte) (int, error) {
	n := 0
	var werr error
	err := t.rc.Write(func(fd uintptr) bool {
		for _, fr := range frames {
			var err error
			for {
				if len(fr) == 1 {
					_, err = unix.Write(int(fd), fr[0])
				} else {
					_, err = unix.Writev(int(fd), fr)
				}
				if err != unix.EINTR {
					break
				}
			}
			if err != nil {
				if werr == nil {
					werr = err // this frame is lost; the rest go on
				}
				continue
			}
			n++
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if errors.Is(err, unix.EBADFD) {
		err = os.ErrClosed
	}
	return n, err
}

func (t *tunDev) Close() error { return t.f.Close() }

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package trail

import (
	"errors"
	"os"
	"syscall"
)

// canLock tells tests whether Create locks.
const canLock = true

// ErrLocked marks a trail another Writer has open.
var ErrLocked = errors.New("trail is open by another writer")

// lockFile takes an exclusive, non-blocking flock on f, released when f is
// closed: two writers appending to one trail would interleave frames.
func lockFile(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
	}); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return ferr
}

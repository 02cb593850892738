//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package trail

import (
	"errors"
	"os"
)

// canLock tells tests whether Create locks.
const canLock = false

// ErrLocked marks a trail another Writer has open (never returned here).
var ErrLocked = errors.New("trail is open by another writer")

// lockFile is a no-op where flock is missing: one writer per trail is then
// the caller's duty.
func lockFile(*os.File) error { return nil }

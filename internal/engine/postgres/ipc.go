package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A server killed with SIGKILL leaves its shared memory behind: the small
// System V segment it holds as an interlock and its POSIX dynamic shared
// memory (/dev/shm/PostgreSQL.N: the control segment, and segments such
// as the statistics' that grew out of the main area), about 1 MB a server.
// The postmaster removes them when it shuts down, or when it next starts
// in the same data directory. A node killed and not started again — the
// lab torn down after a kill fault, or a shutdown that had to kill —
// would leave them on the machine for good. releaseIPC does what that
// next start would have done.

// PostgreSQL 15's layouts (src/include/storage/pg_shmem.h, dsm.c).
const (
	shmemMagic      = 679834894  // PGShmemHeader.magic
	shmemDSMControl = 24         // offset of PGShmemHeader.dsm_control
	dsmControlMagic = 0x9a503d32 // dsm_control_header.magic
	dsmItemsOffset  = 16         // magic, nitems, maxitems, padding
	dsmItemSize     = 40         // handle, refcnt, first_page, npages, pointer, pinned
	dsmDir          = "/dev/shm"
	detachWait      = 5 * time.Second // for a killed postmaster's children to exit
)

// releaseIPC removes the shared memory of this node's server, whose
// postmaster was pid and is gone. It does nothing when the server removed
// it itself (postmaster.pid is gone after a clean shutdown), when
// postmaster.pid names another process, or when something still has the
// segment attached after detachWait.
func (n *node) releaseIPC(pid int) error {
	shmid, ok, err := lockFileShmid(filepath.Join(n.dataDir, "postmaster.pid"), pid)
	if err != nil || !ok {
		return err
	}
	var ds unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(shmid, unix.IPC_STAT, &ds); err != nil {
		return nil // already removed
	}
	if int(ds.Cpid) != pid {
		return nil // not this server's
	}
	// A postmaster killed alone (a shutdown that timed out) leaves its
	// children attached until they notice, within moments.
	for deadline := time.Now().Add(detachWait); ds.Nattch != 0; {
		if time.Now().After(deadline) {
			return nil // still in use
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := unix.SysvShmCtl(shmid, unix.IPC_STAT, &ds); err != nil {
			return nil
		}
	}
	if control := dsmControlOf(shmid); control != 0 {
		removeDSM(dsmDir, control)
	}
	if _, err := unix.SysvShmCtl(shmid, unix.IPC_RMID, nil); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
		return fmt.Errorf("node %s: remove the shared memory segment %d of its killed server: %w", n.Name, shmid, err)
	}
	return nil
}

// lockFileShmid reads the System V segment id from a postmaster.pid whose
// first line is pid: false when the file is gone or names another process.
func lockFileShmid(path string, pid int) (int, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 || strings.TrimSpace(lines[0]) != strconv.Itoa(pid) {
		return 0, false, nil
	}
	f := strings.Fields(lines[6]) // "key shmid"
	if len(f) != 2 {
		return 0, false, nil
	}
	shmid, err := strconv.Atoi(f[1])
	if err != nil || shmid < 0 {
		return 0, false, nil
	}
	return shmid, true, nil
}

// dsmControlOf reads the handle of the dynamic shared memory control
// segment from the header of System V segment shmid (0 if none).
func dsmControlOf(shmid int) uint32 {
	mem, err := unix.SysvShmAttach(shmid, 0, unix.SHM_RDONLY)
	if err != nil {
		return 0
	}
	defer unix.SysvShmDetach(mem)
	if len(mem) < shmemDSMControl+4 || binary.LittleEndian.Uint32(mem) != shmemMagic {
		return 0
	}
	return binary.LittleEndian.Uint32(mem[shmemDSMControl:])
}

// removeDSM unlinks the dynamic shared memory control segment control in
// dir and every segment it lists. Handles with the low bit set live in
// the main area, not in files of their own.
func removeDSM(dir string, control uint32) {
	path := filepath.Join(dir, dsmName(control))
	if b, err := os.ReadFile(path); err == nil && len(b) >= dsmItemsOffset && binary.LittleEndian.Uint32(b) == dsmControlMagic {
		nitems := int(binary.LittleEndian.Uint32(b[4:]))
		for i := range nitems {
			off := dsmItemsOffset + i*dsmItemSize
			if off+8 > len(b) {
				break
			}
			h, refcnt := binary.LittleEndian.Uint32(b[off:]), binary.LittleEndian.Uint32(b[off+4:])
			if h != 0 && h&1 == 0 && refcnt != 0 {
				_ = os.Remove(filepath.Join(dir, dsmName(h)))
			}
		}
	}
	_ = os.Remove(path)
}

func dsmName(h uint32) string { return "PostgreSQL." + strconv.FormatUint(uint64(h), 10) }

package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"replab/internal/storage"
)

// DefaultDataRoot holds one directory per lab for database data (on disk:
// /run is a small tmpfs).
const DefaultDataRoot = "/var/lib/replab"

// SocketRoot holds one directory per lab for servers' unix sockets. It is
// fixed and short whatever the state root: a socket path must fit in 107
// bytes. Lab names are unique on a machine, so directories never clash.
const SocketRoot = "/run/replab-sock"

// DefaultStateRoot holds one directory per lab: its state file and control
// socket. /run is a tmpfs, so a reboot clears it together with the
// namespaces it describes.
const DefaultStateRoot = "/run/replab"

// NamePrefix starts the name of every namespace and cgroup replab creates.
const NamePrefix = "replab-"

// record is what a lab has created so far, written before each creation so
// that `replab lab down` can remove everything after a crash or kill -9.
type record struct {
	Name     string    `json:"name"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start"` // /proc/PID/stat starttime: guards against PID reuse
	Started  time.Time `json:"started"`
	Spec     string    `json:"spec"`
	Netns    []string  `json:"netns"`
	Cgroups  []string  `json:"cgroups"`
	Control  string    `json:"control"`
	DataDir  string    `json:"data_dir,omitempty"`   // engines' data directories live below it
	SockDir  string    `json:"socket_dir,omitempty"` // servers' unix sockets live below it
	// Storage lists the nodes' volumes (mounts, loop devices, storage
	// processes), removed before the data directory they live in.
	Storage []*storage.Record `json:"storage,omitempty"`
}

// objectPrefix starts the names of a lab's namespaces and cgroups. Lab and
// site names are [a-z0-9-], so the dot makes "replab-a.b" unambiguous.
func objectPrefix(lab string) string { return NamePrefix + lab + "." }

// objectName names a site's namespace and cgroups.
func objectName(lab, site string) string { return objectPrefix(lab) + site }

func labDir(root, name string) string { return filepath.Join(root, name) }

func (r *record) save(root string) error {
	dir := labDir(root, r.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

func loadRecord(root, name string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(labDir(root, name), "state.json"))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read state of lab %s: %w", name, err)
	}
	return &r, nil
}

// procStart returns a process's start time in clock ticks since boot.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name may contain spaces; fields after the last ')' are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 overall
}

// alive reports whether the lab's own process still runs (same PID and
// same start time, so a reused PID is not mistaken for it).
func (r *record) alive() bool {
	return r.PID > 0 && r.PIDStart != "" && procStart(r.PID) == r.PIDStart
}

// Running lists the labs whose process is alive.
func Running(root string) []string {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if r, err := loadRecord(root, e.Name()); err == nil && r.alive() {
			out = append(out, r.Name)
		}
	}
	return out
}

// Down removes the named lab, or every lab when name is "": a running
// lab's process is asked to stop (SIGTERM) and given time to clean up;
// whatever a dead one left behind (namespaces, cgroups, processes, sysctls)
// is removed here. It returns one line per thing removed.
func Down(ctx context.Context, root, name string) ([]string, error) {
	var names []string
	if name != "" {
		names = []string{name}
	} else if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if e.IsDir() { // not the labs' fault logs next to them
				names = append(names, e.Name())
			}
		}
	}
	var done []string
	var errs []error
	for _, n := range names {
		r, err := loadRecord(root, n)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := teardownRecord(ctx, root, r)
		done = append(done, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Orphans without a state file (state dir lost, e.g. /run/replab removed).
	prefix := NamePrefix
	if name != "" {
		prefix = objectPrefix(name)
	}
	for _, ns := range listNetns(prefix) {
		killNetnsProcs(ctx, ns)
		if err := deleteNetns(ctx, ns); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "netns "+ns)
		}
	}
	for _, cg := range listCgroups(prefix) {
		if err := removeCgroup(cg); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "cgroup "+cg)
		}
	}
	removeEmptyV2Parent()
	// A monitor of a run that died switched delay accounting on for the
	// machine: back to what it was once no live run holds it.
	if d, err := RestoreDelayAcct(delayAcctPath, delayAcctLockDir); err != nil {
		errs = append(errs, fmt.Errorf("delay accounting: %w", err))
	} else if d != "" {
		done = append(done, d)
	}
	return done, errors.Join(errs...)
}

// delayAcctPath and delayAcctLockDir are the delay accounting switch Down
// restores: the machine's (a test points them at a stand-in).
var delayAcctPath, delayAcctLockDir = DelayAcctPath, DelayAcctLockDir

// teardownRecord removes what r describes. A live lab process is stopped
// with SIGTERM first, and it removes its own lab; whatever remains after
// it exits is removed here.
func teardownRecord(ctx context.Context, root string, r *record) ([]string, error) {
	var done []string
	if r.alive() && r.PID != os.Getpid() {
		_ = syscall.Kill(r.PID, syscall.SIGTERM)
		deadline := time.Now().Add(20 * time.Second)
		for r.alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if r.alive() {
			_ = syscall.Kill(r.PID, syscall.SIGKILL)
			time.Sleep(100 * time.Millisecond)
		}
		done = append(done, fmt.Sprintf("lab %s: stopped process %d", r.Name, r.PID))
		// The process may have removed its record already; re-read it.
		if nr, err := loadRecord(root, r.Name); err == nil {
			r = nr
		} else {
			return done, nil
		}
	}
	var errs []error
	for _, cg := range r.Cgroups {
		killCgroupProcs(cg)
	}
	for _, ns := range r.Netns {
		if !netnsExists(ns) {
			continue
		}
		killNetnsProcs(ctx, ns)
		if err := deleteNetns(ctx, ns); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "netns "+ns)
		}
	}
	// With every process of the lab gone, nothing holds its volumes.
	if len(r.Storage) > 0 {
		d, err := downStorageRecords(ctx, root, r)
		done = append(done, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, cg := range r.Cgroups {
		if _, err := os.Stat(cg); err != nil {
			continue
		}
		if err := removeCgroup(cg); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "cgroup "+cg)
		}
	}
	restored, err := releaseRootSysctls(r.Name)
	done = append(done, restored...)
	if err != nil {
		errs = append(errs, err)
	}
	if r.SockDir != "" {
		if err := os.RemoveAll(r.SockDir); err != nil {
			errs = append(errs, fmt.Errorf("remove sockets of lab %s: %w", r.Name, err))
		}
	}
	if r.DataDir != "" && len(r.Storage) == 0 { // never through a mount left
		if err := os.RemoveAll(r.DataDir); err != nil {
			errs = append(errs, fmt.Errorf("remove data of lab %s: %w", r.Name, err))
		} else if _, err := os.Stat(r.DataDir); err == nil {
			done = append(done, "data "+r.DataDir)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(labDir(root, r.Name)); err != nil {
			errs = append(errs, err)
		}
	}
	// A fault log with faults in it outlives the lab, to be read; an empty
	// one, which a lab that stops removes, is litter of a dead one.
	if fl := FaultLogPath(root, r.Name); isEmptyFile(fl) {
		if err := os.Remove(fl); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "empty fault log "+fl)
		}
	}
	return done, errors.Join(errs...)
}

func isEmptyFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == 0
}

// killNetnsProcs kills every process inside a namespace: a lab's servers
// and whatever users started with `replab exec`.
func killNetnsProcs(ctx context.Context, ns string) {
	for range 3 {
		out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
		if err != nil {
			return
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

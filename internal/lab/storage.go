package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"replab/internal/spec"
	"replab/internal/storage"
)

// A node's storage ([storage.NAME], docs/storage.md) is made after the
// sites and links, which carry its traffic, and before any engine starts;
// it is removed before the links go. Its record is in the lab's state, so
// `lab down` removes it after a crash.

// storagePortBase is the first port a storage site's volumes listen on.
const storagePortBase = 10809 // NBD's port

// volume is one node's running volume.
type volume struct {
	rec *storage.Record // in l.rec.Storage
	h   *storage.Handle
}

// StorageProcess is a process of a node's storage, for the monitors.
type StorageProcess struct {
	Node string // the node whose files it carries
	Name string // nbdkit, nbdfuse, sshfs, sftp-server
	PID  int
	Site string // where it runs
}

// saveRecord saves the lab's record; storage goroutines call it too.
func (l *Lab) saveRecord() error {
	l.dataMu.Lock()
	defer l.dataMu.Unlock()
	return l.rec.save(l.root)
}

// upStorage makes every node's volume.
func (l *Lab) upStorage(ctx context.Context, offline bool) error {
	ports := map[string]int{}
	for _, n := range l.Spec.Nodes {
		st := l.Spec.StorageOf(n.Name)
		if st == nil || st.Kind == spec.StorageLocal {
			continue
		}
		if offline {
			return fmt.Errorf("node %s: storage %s (%s) needs a lab with sites (root), not an offline one", n.Name, st.Name, st.Kind)
		}
		data, err := l.DataDir()
		if err != nil {
			return err
		}
		uid, gid, err := ServerCredentials(ctx)
		if err != nil {
			return err
		}
		v := storage.Volume{Node: n.Name, Storage: *st, Dir: filepath.Join(data, "storage", n.Name), NodeSite: l.Site(n.Site), UID: uid, GID: gid}
		if err := os.MkdirAll(filepath.Dir(v.Dir), 0o755); err != nil {
			return err
		}
		if st.Site != "" {
			srv := l.Site(st.Site)
			if ports[st.Site] == 0 {
				ports[st.Site] = storagePortBase
			}
			v.Server, v.ServerAddr, v.Port = srv, srv.Address, ports[st.Site]
			ports[st.Site]++
			l.nodesMu.Lock()
			l.storeEPs = append(l.storeEPs, netip.AddrPortFrom(srv.Address, uint16(v.Port)))
			l.nodesMu.Unlock()
		}
		rec := &storage.Record{}
		l.dataMu.Lock()
		l.rec.Storage = append(l.rec.Storage, rec)
		l.dataMu.Unlock()
		h, err := storage.Up(ctx, v, rec, l.saveRecord)
		l.nodesMu.Lock()
		if l.vols == nil {
			l.vols = map[string]*volume{}
		}
		l.vols[n.Name] = &volume{rec: rec, h: h}
		l.nodesMu.Unlock()
		if err != nil {
			return err
		}
		if st.IOPS > 0 || st.BandwidthBps > 0 {
			if err := l.limitIO(n, st, rec.Loop); err != nil {
				return err
			}
		}
		what := st.Kind
		if st.Site != "" {
			what += " served from site " + st.Site
		}
		fmt.Fprintf(l.log, "node %s: files on storage %s (%s) at %s\n", n.Name, st.Name, what, storage.MountDir(v.Dir))
	}
	return nil
}

// NodeDataDir is the directory a node's files must live in: its volume
// when the node names a storage, else the lab's data directory (DataDir).
func (l *Lab) NodeDataDir(node string) (string, error) {
	st := l.Spec.StorageOf(node)
	if st == nil || st.Kind == spec.StorageLocal {
		return l.DataDir()
	}
	l.nodesMu.Lock()
	v := l.vols[node]
	l.nodesMu.Unlock()
	if v == nil {
		return "", fmt.Errorf("node %s: storage %s is not up", node, st.Name)
	}
	return storage.MountDir(v.rec.Dir), nil
}

// StorageProcesses lists the running processes of the nodes' storage.
func (l *Lab) StorageProcesses() []StorageProcess {
	l.nodesMu.Lock()
	defer l.nodesMu.Unlock()
	var out []StorageProcess
	for _, n := range l.Spec.Nodes {
		v := l.vols[n.Name]
		if v == nil {
			continue
		}
		st := l.Spec.StorageOf(n.Name)
		for _, p := range v.h.Procs() {
			site := st.Site
			if p.Client {
				site = n.Site
			}
			out = append(out, StorageProcess{Node: n.Name, Name: p.Name, PID: p.PID, Site: site})
		}
	}
	return out
}

// downStorage removes every volume while the links still carry their
// traffic. Whatever still runs in the sites but the storage's own
// processes (a server an engine left) is killed first: it would keep a
// file system busy.
func (l *Lab) downStorage(ctx context.Context) error {
	l.nodesMu.Lock()
	vols := l.vols
	l.vols = nil
	l.nodesMu.Unlock()
	if len(vols) == 0 {
		return nil
	}
	keep := map[int]bool{os.Getpid(): true}
	for _, v := range vols {
		for _, p := range v.h.Procs() {
			keep[p.PID] = true
		}
	}
	for _, s := range l.sites {
		for _, cg := range s.Cgroups {
			for _, pid := range cgroupProcs(cg) {
				if !keep[pid] {
					_ = syscallKill(pid)
				}
			}
		}
	}
	var errs []error
	for _, v := range vols {
		if err := storage.Down(ctx, v.rec, v.h, true, l.saveRecord); err != nil {
			errs = append(errs, err)
			continue
		}
		l.dataMu.Lock()
		for i, r := range l.rec.Storage {
			if r == v.rec {
				l.rec.Storage = append(l.rec.Storage[:i], l.rec.Storage[i+1:]...)
				break
			}
		}
		l.dataMu.Unlock()
	}
	if err := l.saveRecord(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// downStorageRecords removes the volumes a record lists, after a crash:
// the lab's processes are dead, and so are its links.
func downStorageRecords(ctx context.Context, root string, r *record) ([]string, error) {
	var done []string
	var errs []error
	var left []*storage.Record
	for _, sr := range r.Storage {
		if err := storage.Down(ctx, sr, nil, false, func() error { return r.save(root) }); err != nil {
			errs = append(errs, err)
			left = append(left, sr)
		} else {
			done = append(done, fmt.Sprintf("storage %s of node %s", sr.Storage, sr.Node))
		}
	}
	r.Storage = left
	_ = r.save(root)
	return done, errors.Join(errs...)
}

// limitIO throttles the I/O of node's site on the node's block device.
func (l *Lab) limitIO(n spec.Node, st *spec.Storage, dev string) error {
	var sb unix.Stat_t
	if err := unix.Stat(dev, &sb); err != nil {
		return fmt.Errorf("node %s: storage %s: %w", n.Name, st.Name, err)
	}
	if err := setIOLimits(l.Site(n.Site).Cgroups, unix.Major(uint64(sb.Rdev)), unix.Minor(uint64(sb.Rdev)), st.IOPS, st.BandwidthBps); err != nil {
		return fmt.Errorf("node %s: storage %s: limit I/O on %s: %w", n.Name, st.Name, dev, err)
	}
	return nil
}

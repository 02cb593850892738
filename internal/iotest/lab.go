package iotest

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/report"
	"replab/internal/spec"
)

// Report is iotest.json: every measured node of a lab, and how.
type Report struct {
	Lab            string             `json:"lab"`
	Complete       bool               `json:"complete"` // false: stopped early or failed; Nodes holds what was measured
	Error          string             `json:"error,omitempty"`
	Quick          bool               `json:"quick"`
	RuntimePerJobS float64            `json:"runtime_per_job_s"`
	FileSizeBytes  int64              `json:"file_size_bytes"`
	Nodes          []Row              `json:"nodes"`
	Environment    report.Environment `json:"environment"`
}

// LabNodes measures, one after another, the storage of the lab's nodes
// (only those named in only, when given) from where each node's server
// would do its I/O: inside its site, as the servers' OS user, in the
// directory its files would live in. It returns the rows measured so far
// also on error. progress gets a line before and after each node.
func LabNodes(ctx context.Context, l *lab.Lab, only []string, opt Options, progress io.Writer) ([]Row, error) {
	opt = opt.withDefaults()
	var nodes []spec.Node
	for _, n := range l.Spec.Nodes {
		if len(only) == 0 || slices.Contains(only, n.Name) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 || len(only) > 0 && len(nodes) != len(only) {
		var names []string
		for _, n := range l.Spec.Nodes {
			names = append(names, n.Name)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("lab %s has no nodes to measure: give it [node.NAME] tables", l.Spec.Lab.Name)
		}
		return nil, fmt.Errorf("no node %s in lab %s (nodes: %s)", strings.Join(only, ", "), l.Spec.Lab.Name, strings.Join(names, ", "))
	}
	uid, gid, err := enginekit.ServerCredentials(ctx)
	if err != nil {
		return nil, err
	}
	opt.User = &User{UID: uid, GID: gid}
	jobs := 2*len(opt.BlockSizes) + 3
	var rows []Row
	for i, n := range nodes {
		site := l.Site(n.Site)
		if site == nil {
			return rows, fmt.Errorf("node %s: no site %s", n.Name, n.Site)
		}
		dir, storage, err := nodeDir(l, n.Name, uid, gid)
		if err != nil {
			return rows, fmt.Errorf("node %s: %w", n.Name, err)
		}
		fmt.Fprintf(progress, "iotest %d/%d: node %s (site %s, %s storage): %d fio jobs of %s in %s as %s\n",
			i+1, len(nodes), n.Name, n.Site, storage, jobs, opt.Runtime, dir, enginekit.ServerUser)
		o := opt
		o.Start = site.Start
		r, err := Profile(ctx, dir, o)
		if err != nil {
			return rows, fmt.Errorf("node %s: %w", n.Name, err)
		}
		rows = append(rows, Row{Node: n.Name, Site: n.Site, Storage: storage, Result: r})
		fmt.Fprintf(progress, "iotest %d/%d: node %s: %s (%.1f s)\n", i+1, len(nodes), n.Name, r.Brief(), r.ElapsedS)
	}
	return rows, nil
}

// nodeDir is where node's files live, owned by the servers' OS user, and
// its storage class: the node's storage volume (lab.NodeDataDir, a
// [storage.NAME] of the spec), or the lab's data directory on this
// machine's disk ("local").
func nodeDir(l *lab.Lab, node string, uid, gid int) (dir, storage string, err error) {
	data, err := l.NodeDataDir(node)
	if err != nil {
		return "", "", err
	}
	storage = spec.StorageLocal
	if st := l.Spec.StorageOf(node); st != nil {
		storage = st.Kind
	}
	dir = filepath.Join(data, "iotest-"+node)
	return dir, storage, enginekit.MkdirOwned(dir, uid, gid)
}

// Brief is the profile in one line, for progress output.
func (r *Result) Brief() string {
	var b strings.Builder
	for _, x := range r.RandRead {
		fmt.Fprintf(&b, "rand read %s %.0f iops, ", sizeText(x.BlockBytes), x.IOPS)
	}
	for _, x := range r.RandWrite {
		fmt.Fprintf(&b, "rand write %s %.0f iops, ", sizeText(x.BlockBytes), x.IOPS)
	}
	fmt.Fprintf(&b, "seq read %.1f MB/s, seq write %.1f MB/s, sync write %s p50 %.3f ms p99 %.3f ms",
		r.SeqReadMBPerS, r.SeqWriteMBPerS, sizeText(SyncBlockBytes), r.SyncWrite.P50Ms, r.SyncWrite.P99Ms)
	return b.String()
}

// Settings are the runtime per job and file size Profile uses with opt.
func Settings(opt Options) (runtime time.Duration, fileSizeBytes int64) {
	opt = opt.withDefaults()
	return opt.Runtime, opt.FileSizeBytes
}

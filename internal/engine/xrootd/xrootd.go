// Package xrootd runs XRootD data servers in a lab's sites: the page
// server of the object database study (seed 004), whose own server
// (Objectivity's AMS) is proprietary; XRootD is its successor in
// high-energy physics. Each node exports a generated data set — files of
// a chosen size whose content derives from the run's seed (package
// pagedata) — that the page-read workload reads across the lab's links.
// There is no replication: a node is a server.
package xrootd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/pagedata"
	"replab/internal/spec"
	"replab/internal/units"
)

// Where Debian's xrootd-server puts the server.
const serverBin = "/usr/bin/xrootd"

// DefaultPort is XRootD's registered port, the first of a site's nodes.
const DefaultPort = 1094

// Role is the only role a node has.
const Role = "server"

// Defaults of the data set.
const (
	DefaultFiles    = 1
	DefaultFileSize = 64 << 20
)

// Engine is XRootD.
type Engine struct{}

// Kind implements engine.Engine.
func (Engine) Kind() string { return "xrootd" }

// plan is what the spec asks of the engine.
type plan struct {
	files    int
	fileSize int64
	seed     int64
}

func makePlan(s *spec.Spec) (*plan, error) {
	errs := s.NewErrors()
	if r := s.Scheme.Replication; r != "" && r != "none" {
		errs.Add("scheme.replication", `XRootD serves files and replicates nothing: leave replication out, or write "none"`)
	}
	o := s.SchemeOptions("engine xrootd")
	p := &plan{
		files:    int(o.Int("files", DefaultFiles, 1, 1000)),
		fileSize: o.Size("file_size", DefaultFileSize, 4096, 64<<30),
		seed:     s.Run.Seed,
	}
	errs.Join(o.Err())
	if len(s.Nodes) == 0 {
		errs.Add("engine", `engine xrootd needs a [node.NAME] with site = "…" and role = "server"`)
	}
	for _, n := range s.Nodes {
		f := "node." + n.Name
		if n.Role != Role {
			errs.Add(f+".role", `unknown role %q for engine xrootd: a node is a data server, role = "server"`, n.Role)
		}
		if n.From != "" {
			errs.Add(f+".from", "XRootD nodes replicate from nothing: remove from")
		}
		if len(n.Settings) > 0 {
			errs.Add(f+".settings", "engine xrootd takes no server settings")
		}
		if len(n.Tables) > 0 {
			errs.Add(f+".table", "engine xrootd has no tables")
		}
		if n.ApplyDelay > 0 {
			errs.Add(f+".apply_delay", "engine xrootd applies nothing")
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Validate implements engine.Engine.
func (Engine) Validate(s *spec.Spec) error {
	_, err := makePlan(s)
	return err
}

// The capabilities a cluster has.
var (
	_ engine.NodeControl = (*cluster)(nil)
	_ engine.Pauser      = (*cluster)(nil)
	_ engine.PageServer  = (*cluster)(nil)
)

type cluster struct {
	enginekit.ProcNodes // node control and pausing
	lab                 *lab.Lab
	plan                *plan
	version             string
	uid, gid            int
	log                 io.Writer
	nodes               []*node
	byName              map[string]*node
	once                sync.Once
}

// Up implements engine.Engine: each node's data set is written, then
// every server starts in its site and Up waits until each answers a ping
// from its own site.
func (Engine) Up(ctx context.Context, l *lab.Lab, log io.Writer) (_ engine.Cluster, err error) {
	p, err := makePlan(l.Spec)
	if err != nil {
		return nil, err
	}
	version, err := findVersion(ctx)
	if err != nil {
		return nil, err
	}
	uid, gid, err := enginekit.ServerCredentials(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := enginekit.NodeAddresses(l, DefaultPort)
	if err != nil {
		return nil, err
	}
	c := &cluster{lab: l, plan: p, version: version, uid: uid, gid: gid, log: enginekit.NewLockedWriter(log), byName: map[string]*node{}}
	c.ProcNodes = c.procNodes()
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for _, sn := range l.Spec.Nodes {
		data, err := l.NodeDataDir(sn.Name) // on its storage
		if err != nil {
			return nil, err
		}
		base := filepath.Join(data, "xrootd-"+sn.Name)
		n := &node{Node: sn, c: c, site: l.Site(sn.Site), addr: addrs[sn.Name], base: base}
		c.nodes = append(c.nodes, n)
		c.byName[sn.Name] = n
	}
	start := time.Now()
	if err := enginekit.Each(c.nodes, func(n *node) error { return n.create(ctx) }); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.log, "xrootd: %d node(s) serve %d file(s) of %s each (%.1f s)\n", len(c.nodes), p.files, units.Bytes(float64(p.fileSize)), time.Since(start).Seconds())
	return c, nil
}

var versionRE = regexp.MustCompile(`v(\d+\.\d+\.\d+)`)

// findVersion checks that the server is installed and returns its
// version, e.g. "5.5.3".
func findVersion(ctx context.Context) (string, error) {
	if _, err := os.Stat(serverBin); err != nil {
		return "", fmt.Errorf("XRootD is not installed (no %s): scripts/deps.sh demo, or apt-get install xrootd-server xrootd-client", serverBin)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, serverBin, "-v").CombinedOutput() // prints to stderr, exits 0 or 1 by version
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("cannot read the XRootD version from %q", strings.TrimSpace(string(out)))
	}
	return m[1], nil
}

// Nodes implements engine.Cluster. A server takes the clients' requests:
// it is where the workload goes (Writable), with no upstream.
func (c *cluster) Nodes() []engine.Node {
	out := make([]engine.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, Addr: n.addr,
			DSN: "root://" + n.addr.String() + "/", Version: c.version, Writable: true})
	}
	return out
}

// WaitFlowing implements engine.Cluster: nothing replicates; every
// running server must answer.
func (c *cluster) WaitFlowing(ctx context.Context) error {
	return enginekit.Each(c.nodes, func(n *node) error {
		if n.pid() == 0 {
			return fmt.Errorf("node %s is not running", n.Name)
		}
		return n.ping(ctx, 10*time.Second)
	})
}

// ReplicationState implements engine.Cluster: there are no replicas.
func (c *cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	return nil, nil
}

// Processes implements engine.Cluster: one xrootd process per node (its
// threads serve every request; the whole process is the "server" role).
func (c *cluster) Processes(ctx context.Context) ([]engine.Process, error) {
	var out []engine.Process
	for _, n := range c.nodes {
		if pid := n.pid(); pid != 0 {
			out = append(out, engine.Process{Node: n.Name, Role: "server", PID: pid})
		}
	}
	return out, nil
}

// Files implements engine.PageServer.
func (c *cluster) Files() []engine.ServedFile {
	var out []engine.ServedFile
	for _, n := range c.nodes {
		for i := range c.plan.files {
			out = append(out, engine.ServedFile{Node: n.Name, Path: filePath(i), Index: i, Size: c.plan.fileSize, Seed: c.plan.seed})
		}
	}
	return out
}

// Close implements engine.Cluster.
func (c *cluster) Close() error {
	c.once.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); n.stop(10 * time.Second) }()
		}
		wg.Wait()
	})
	return nil
}

// filePath is the i-th file as clients name it.
func filePath(i int) string { return fmt.Sprintf("/replab/pages-%04d.bin", i) }

// writeData writes the node's data set under root, owned by the servers'
// user.
func (n *node) writeData() error {
	dir := filepath.Join(n.dataDir(), "replab")
	if err := enginekit.MkdirOwned(n.dataDir(), n.c.uid, n.c.gid); err != nil {
		return err
	}
	if err := enginekit.MkdirOwned(dir, n.c.uid, n.c.gid); err != nil {
		return err
	}
	for i := range n.c.plan.files {
		path := filepath.Join(n.dataDir(), filePath(i))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		err = pagedata.Write(f, n.c.plan.seed, i, n.c.plan.fileSize)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.Chown(path, n.c.uid, n.c.gid); err != nil {
			return err
		}
	}
	return nil
}

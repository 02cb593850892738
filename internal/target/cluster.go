package target

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/spec"
)

// Cluster is a running primary and its replicas that replab did not
// build: engine.Cluster, engine.SQL, engine.LagReaders and
// engine.Pipeliner. What differs between engines is their
// engine.Attached.
type Cluster struct {
	t       *spec.Target
	run     spec.Run
	log     io.Writer
	nodes   []engine.Node
	srv     engine.Attached
	dialect engine.Dialect
	token   string // for agents

	mu      sync.Mutex
	created bool // replab created t.Schema: Close drops it (unless keep_schema)
	closed  bool
}

// Connect implements engine.TargetMode: it reaches every node of s's
// [target] through its engine's Attacher, checks that the servers
// replicate as the spec says and that replab may do what it was asked to
// (create its schema), and returns the cluster. It changes nothing on the
// servers; on error nothing is left open.
func (e Engine) Connect(ctx context.Context, s *spec.Spec, log io.Writer) (_ engine.Cluster, err error) {
	t := s.Target
	if t == nil {
		return nil, errors.New("the spec has no [target]")
	}
	if e.kind != t.Engine {
		e = e.ForSpec(s).(Engine)
	}
	if e.att == nil {
		return nil, fmt.Errorf("this replab cannot measure existing %s servers", t.Engine)
	}
	if log == nil {
		log = io.Discard
	}
	c := &Cluster{t: t, run: s.Run, log: log, dialect: e.Dialect()}
	password := ""
	if t.PasswordFile != "" {
		if password, err = readSecret(t.PasswordFile, "[target] password_file"); err != nil {
			return nil, err
		}
	}
	if c.srv, err = e.att.Attach(t, password); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.srv.Close()
		}
	}()
	facts := make([]engine.ServerFacts, len(t.Nodes))
	err = enginekit.Each(indices(len(t.Nodes)), func(i int) error {
		f, err := c.srv.Facts(ctx, t.Nodes[i].Name)
		facts[i] = f
		return c.at(t.Nodes[i].Name, err)
	})
	if err != nil {
		return nil, err
	}
	if err := c.checkTopology(facts); err != nil {
		return nil, err
	}
	for i, n := range t.Nodes {
		en := engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, From: n.From, DSN: n.DSN, Version: facts[i].Version,
			Writable: n.Role == "primary" || n.Role == "master"}
		if n.From != "" {
			en.Upstreams = []string{n.From}
		}
		if n.Role == "master" {
			en.Upstreams = c.otherMasters(n.Name)
		}
		host, port := c.srv.Addr(n.Name)
		if a, err := netip.ParseAddr(host); err == nil {
			en.Addr = netip.AddrPortFrom(a, uint16(port))
		}
		c.nodes = append(c.nodes, en)
	}
	if err := c.checkSchema(ctx); err != nil {
		return nil, err
	}
	if err := c.checkAgents(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// otherMasters are the masters besides node.
func (c *Cluster) otherMasters(node string) []string {
	var out []string
	for _, m := range c.t.Nodes {
		if m.Role == "master" && m.Name != node {
			out = append(out, m.Name)
		}
	}
	return out
}

func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// where names a node's server for messages: host:port, never the
// password.
func (c *Cluster) where(node string) string {
	host, port := c.srv.Addr(node)
	return fmt.Sprintf("%s (%s)", node, net.JoinHostPort(host, strconv.Itoa(port)))
}

// at puts node in front of err.
func (c *Cluster) at(node string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("node %s: %w", c.where(node), err)
}

// checkTopology compares what the servers say with the spec: the primary
// takes writes, every replica is a copy of the same system and streams
// from the node named as its upstream, every master is a full member of
// the same multi-master cluster.
func (c *Cluster) checkTopology(facts []engine.ServerFacts) error {
	var errs []error
	byName := map[string]engine.ServerFacts{}
	for i, n := range c.t.Nodes {
		byName[n.Name] = facts[i]
	}
	first := -1 // the first master: the others must be in its cluster
	for i, n := range c.t.Nodes {
		f := facts[i]
		if n.Role == "master" {
			switch {
			case f.NotMaster != "":
				errs = append(errs, c.at(n.Name, errors.New(f.NotMaster)))
			case f.Group == "":
				errs = append(errs, c.at(n.Name, errors.New("the spec says master, but the server is in no multi-master cluster")))
			case first < 0:
				first = i
			case f.Group != facts[first].Group:
				errs = append(errs, c.at(n.Name, fmt.Errorf("not in the same %s as %s (cluster state %s, %s's is %s)", f.GroupKind, c.t.Nodes[first].Name, f.Group, c.t.Nodes[first].Name, facts[first].Group)))
			}
			continue
		}
		switch {
		case n.Role == "primary" && f.Replica:
			errs = append(errs, c.at(n.Name, errors.New("the spec says primary, but the server is a replica: name the server that takes writes as primary")))
			continue
		case n.Role != "primary" && !f.Replica:
			errs = append(errs, c.at(n.Name, fmt.Errorf("the spec says %s from %s, but the server replicates from nobody", n.Role, n.From)))
			continue
		case n.Role == "primary":
			continue
		}
		up, ok := byName[n.From]
		if !ok {
			continue // the spec refused it already
		}
		if f.SystemID != "" && up.SystemID != "" && f.SystemID != up.SystemID {
			errs = append(errs, c.at(n.Name, fmt.Errorf("not a copy of %s: its system identifier is %s, %s's is %s", n.From, f.SystemID, n.From, up.SystemID)))
			continue
		}
		if !f.Receiving {
			errs = append(errs, c.at(n.Name, fmt.Errorf("a replica that receives from nobody now (no WAL receiver, or replication stopped): it does not stream from %s", n.From)))
			continue
		}
		if !c.sameServer(f.UpstreamHost, f.UpstreamPort, n.From) {
			hint := ""
			if other := c.nodeAt(f.UpstreamHost, f.UpstreamPort); other != "" {
				hint = fmt.Sprintf(": that is node %s; write from = %q", other, other)
			}
			errs = append(errs, c.at(n.Name, fmt.Errorf("the spec says it replicates from %s, but it streams from %s%s", c.where(n.From),
				net.JoinHostPort(f.UpstreamHost, strconv.Itoa(f.UpstreamPort)), hint)))
		}
	}
	return errors.Join(errs...)
}

// sameServer says whether host:port reaches node: the same port, and the
// same host by name or by any of its addresses.
func (c *Cluster) sameServer(host string, port int, node string) bool {
	h, p := c.srv.Addr(node)
	if port != p {
		return false
	}
	if host == h {
		return true
	}
	a, b := resolve(host), resolve(h)
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// nodeAt is the node whose server is at host:port, or "".
func (c *Cluster) nodeAt(host string, port int) string {
	for _, n := range c.t.Nodes {
		if c.sameServer(host, port, n.Name) {
			return n.Name
		}
	}
	return ""
}

func resolve(host string) []string {
	if strings.HasPrefix(host, "/") {
		return []string{host} // a socket directory
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []string{a.Unmap().String()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil
	}
	return addrs
}

// primary is the node that takes writes.
func (c *Cluster) primary() string {
	for _, n := range c.nodes {
		if n.Writable {
			return n.Name
		}
	}
	return ""
}

// checkSchema checks, before anything is created, that replab may create
// its schema (create_schema) and that it would overwrite nothing.
func (c *Cluster) checkSchema(ctx context.Context) error {
	p := c.primary()
	st, err := c.srv.Schema(ctx, p)
	if err != nil {
		return c.at(p, fmt.Errorf("read schema %s: %w", c.t.Schema, err))
	}
	kind := st.Word
	switch {
	case c.t.CreateSchema && st.Exists && st.Objects != "":
		return c.at(p, fmt.Errorf("%s %s exists and holds tables (%s): replab will not overwrite them; drop the %s, or set [target] schema to a new name, or use them as they are with create_schema = false", kind, c.t.Schema, st.Objects, kind))
	case c.t.CreateSchema && st.Exists:
		return c.at(p, fmt.Errorf("%s %s exists already: replab creates its own %s and drops it at the end; drop it, or set [target] schema to a new name, or use it as it is with create_schema = false", kind, c.t.Schema, kind))
	case c.t.CreateSchema && st.CannotCreate != "":
		return c.at(p, errors.New(st.CannotCreate))
	case !c.t.CreateSchema && !st.Exists:
		return c.at(p, fmt.Errorf("%s %s does not exist, and replab may not create it: set [target] create_schema = true (replab creates it and drops it at the end; keep_schema = true keeps it for later runs)", kind, c.t.Schema))
	}
	return nil
}

// Nodes implements engine.Cluster.
func (c *Cluster) Nodes() []engine.Node { return slices.Clone(c.nodes) }

// Dialect implements engine.SQL.
func (c *Cluster) Dialect() engine.Dialect { return c.dialect }

// Open implements engine.SQL: a pool to node from this host, in replab's
// schema. fromSite is a label here: the driver runs where it was started.
func (c *Cluster) Open(ctx context.Context, node, fromSite string) (*sql.DB, error) {
	if c.t.Node(node) == nil {
		return nil, enginekit.NoSuchNode(node, c.nodes)
	}
	return c.srv.Open(node)
}

// Pipe implements engine.Pipeliner: a target pipelines a transaction
// type in one round trip as the lab's engine does (on a real WAN the
// difference is two round trips a transaction), where its engine can;
// elsewhere the driver sends statement by statement (ErrNoPipeline).
func (c *Cluster) Pipe(ctx context.Context, db *sql.DB, stmts []string) (engine.Pipe, error) {
	if p, ok := c.srv.(engine.Pipeliner); ok {
		return p.Pipe(ctx, db, stmts)
	}
	return nil, engine.ErrNoPipeline
}

var _ engine.Pipeliner = (*Cluster)(nil)

// ApplySchema implements engine.SQL: with create_schema, the schema and
// its tables at the primary (the replicas get them through replication);
// without, a check that every table is there.
func (c *Cluster) ApplySchema(ctx context.Context, s engine.Schema) error {
	p := c.primary()
	if !c.t.CreateSchema {
		return c.checkTables(ctx, s)
	}
	err := c.srv.Create(ctx, p, s, c.isCreated(), func() {
		c.mu.Lock()
		c.created = true
		c.mu.Unlock()
	})
	if err != nil {
		return c.at(p, err)
	}
	fmt.Fprintf(c.log, "target: created schema %s at %s with %d tables%s\n", c.t.Schema, p, len(s.Tables), c.dropNote())
	return nil
}

// isCreated says whether replab made its schema already.
func (c *Cluster) isCreated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created
}

func (c *Cluster) dropNote() string {
	if c.t.KeepSchema {
		return " (kept at the end: keep_schema = true)"
	}
	return " (dropped at the end)"
}

// checkTables says which of s's tables the schema lacks.
func (c *Cluster) checkTables(ctx context.Context, s engine.Schema) error {
	p := c.primary()
	have, err := c.srv.Tables(ctx, p)
	if err != nil {
		return c.at(p, err)
	}
	var missing []string
	for _, t := range s.Tables {
		if !slices.Contains(have, strings.ToLower(t.Name)) {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		return c.at(p, fmt.Errorf("schema %s lacks table(s) %s, and create_schema = false: run once with create_schema = true and keep_schema = true to have replab create and load them", c.t.Schema, strings.Join(missing, ", ")))
	}
	return nil
}

// Loads reports whether replab loads the workload's data: only into
// tables it created.
func (c *Cluster) Loads() bool { return c.t.CreateSchema }

// WaitFlowing implements engine.Cluster: every replica applies at least
// the primary's position as of now, within two minutes.
func (c *Cluster) WaitFlowing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p := c.primary()
	pos, err := c.srv.Position(ctx, p)
	if err != nil {
		return c.at(p, fmt.Errorf("read its position: %w", err))
	}
	return enginekit.Each(engine.Replicas(c.nodes), func(n engine.Node) error {
		for {
			done, at, err := c.srv.Reached(ctx, n.Name, pos)
			if err != nil {
				return c.at(n.Name, fmt.Errorf("wait until it applies %s: %w (it is at %s)", pos, err, at))
			}
			if done {
				return nil
			}
			select {
			case <-ctx.Done():
				return c.at(n.Name, fmt.Errorf("did not apply the primary's position %s within 2 minutes (it is at %s)", pos, at))
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// ReplicationState implements engine.Cluster, read at each replica: what
// it received and applied, and how far behind the primary it is.
func (c *Cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	p := c.primary()
	pos, err := c.srv.Position(ctx, p)
	if err != nil {
		return nil, c.at(p, err)
	}
	var out []engine.ReplicaState
	for _, n := range engine.Replicas(c.nodes) {
		r, err := c.srv.State(ctx, n.Name, strings.Join(n.Upstreams, ","), pos)
		if err != nil {
			return nil, c.at(n.Name, fmt.Errorf("read its replication state: %w", err))
		}
		out = append(out, r)
	}
	return out, nil
}

// Processes implements engine.Cluster: the servers run on other hosts,
// whose processes replab cannot see.
func (c *Cluster) Processes(context.Context) ([]engine.Process, error) { return nil, nil }

// Close implements engine.Cluster: drops the schema replab created
// (unless keep_schema). Safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	defer c.srv.Close()
	if !c.created || c.t.KeepSchema {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := c.primary()
	if err := c.srv.Drop(ctx, p); err != nil {
		return c.at(p, fmt.Errorf("drop schema %s: %w (drop it by hand)", c.t.Schema, err))
	}
	fmt.Fprintf(c.log, "target: dropped schema %s at %s\n", c.t.Schema, p)
	return nil
}

package spec

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
)

// Target is the [target] table: servers that already exist, measured as
// they are, instead of a lab. A spec with [target] has no [lab], [site],
// [[link]], [engine], [node.NAME], [storage] or [[fault]] tables.
type Target struct {
	Name   string // names the results, as [lab] name does for a lab
	Engine string // "postgres" or "mariadb": the SQL dialect and how the topology is read
	// Site is where the driver's host is, for labels and to prefer a
	// replica there for reads; "" when not said.
	Site string
	// Schema holds replab's tables: a PostgreSQL schema, a MariaDB
	// database. Default "replab".
	Schema string
	// CreateSchema lets replab create Schema and its tables at the
	// primary, and drop them at the end (unless KeepSchema). Without it
	// the tables must exist already and are used as they are.
	CreateSchema bool
	KeepSchema   bool
	// PasswordFile holds the password of every node's user; without it the
	// driver's environment gives it (PGPASSWORD, ~/.pgpass; MYSQL_PWD).
	PasswordFile string
	// AgentTokenFile holds the token agents are given (else the
	// environment's REPLAB_AGENT_TOKEN).
	AgentTokenFile string
	ConnectTimeout time.Duration
	Nodes          []TargetNode
	Line           int
}

// TargetNode is one [target.node.NAME] table: an existing server.
type TargetNode struct {
	Name  string
	Role  string // "primary", "standby"/"replica" (one and the same here), or "master" (every node of a Galera cluster)
	From  string // a replica's upstream, as the servers must confirm
	DSN   string // how to reach it from the driver's host; never a password
	Site  string // a label: where it runs ("" when not said)
	Agent string // host:port of a replab agent beside it; "" watches from the driver's host
	Line  int
}

// DefaultTargetSchema is where replab's tables go in target mode.
const DefaultTargetSchema = "replab"

// DefaultConnectTimeout bounds connecting to a target node.
const DefaultConnectTimeout = 10 * time.Second

var (
	targetKeys     = []string{"name", "engine", "site", "schema", "create_schema", "keep_schema", "password_file", "agent_token_file", "connect_timeout", "node"}
	targetNodeKeys = []string{"role", "from", "dsn", "site", "agent"}
	targetEngines  = []string{"postgres", "mariadb"}
	targetRoles    = []string{"primary", "standby", "replica", "master"}
	schemaRE       = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	// labOnly are the tables that build a lab: a target spec has none.
	labOnly = []string{"lab", "site", "link", "engine", "node", "storage", "scheme", "fault"}
)

// TargetNode returns the named target node or nil.
func (t *Target) Node(name string) *TargetNode {
	for i := range t.Nodes {
		if t.Nodes[i].Name == name {
			return &t.Nodes[i]
		}
	}
	return nil
}

func (c *decoder) target(root map[string]any, s *Spec) {
	v, present := root["target"]
	if !present {
		return
	}
	p := path{"target"}
	c.remember(s, p)
	m, ok := c.table(p, v, `write [target] with name, engine and [target.node.NAME] tables`)
	if !ok {
		return
	}
	for _, k := range labOnly {
		if _, has := root[k]; has {
			c.failAt(path{k}, "a spec with [target] measures existing servers and builds no lab: remove [%s] (the lab-only tables are [lab], [site], [[link]], [engine], [node.NAME], [storage], [scheme] and [[fault]])", k)
		}
	}
	c.checkKeys(p, m, targetKeys, "[target]")
	t := &Target{Schema: DefaultTargetSchema, ConnectTimeout: DefaultConnectTimeout, Line: c.d.line(p)}
	str := func(pp path, mm map[string]any, key, want string) (string, bool) {
		v, ok := c.get(pp, mm, key, kString, want)
		if !ok {
			return "", false
		}
		c.remember(s, pp.child(key))
		return strings.TrimSpace(v.(string)), true
	}
	if name, ok := str(p, m, "name", `a string like "prod-eu"`); ok {
		if !labNameRE.MatchString(name) {
			c.fail(p.child("name"), m["name"], "want 1 to 20 characters of a-z, 0-9 and '-', starting with a letter (it names the results)")
		}
		t.Name = name
	} else if _, has := m["name"]; !has {
		c.failAt(p, `name is required, e.g. name = "prod-eu" (it names the results)`)
	}
	if e, ok := str(p, m, "engine", `"postgres" or "mariadb"`); ok {
		if !contains(targetEngines, e) {
			c.fail(p.child("engine"), m["engine"], "unknown engine%s; target mode reads: %s", didYouMean(e, targetEngines), strings.Join(targetEngines, ", "))
		}
		t.Engine = e
	} else if _, has := m["engine"]; !has {
		c.failAt(p, `engine is required: "postgres" or "mariadb"`)
	}
	t.Site, _ = str(p, m, "site", `a site label like "eu"`)
	if sc, ok := str(p, m, "schema", `a schema name like "replab"`); ok {
		if !schemaRE.MatchString(sc) {
			c.fail(p.child("schema"), m["schema"], "want 1 to 63 characters of a-z, 0-9 and '_', starting with a letter or '_'")
		}
		t.Schema = sc
	}
	for key, dst := range map[string]*bool{"create_schema": &t.CreateSchema, "keep_schema": &t.KeepSchema} {
		if v, ok := c.get(p, m, key, kBool, "true or false"); ok {
			c.remember(s, p.child(key))
			*dst = v.(bool)
		}
	}
	t.PasswordFile, _ = str(p, m, "password_file", `a file path like "/etc/replab/password"`)
	t.AgentTokenFile, _ = str(p, m, "agent_token_file", `a file path like "/etc/replab/agent.token"`)
	if v, ok := str(p, m, "connect_timeout", `a duration like "10s"`); ok {
		d, msg := parseDurationMax(v, 10*time.Minute)
		if msg == "" && d <= 0 {
			msg = "want a duration above 0, like \"10s\""
		}
		if msg != "" {
			c.fail(p.child("connect_timeout"), m["connect_timeout"], "%s", msg)
		}
		t.ConnectTimeout = d
	}
	t.Nodes = c.targetNodes(s, p, m, str)
	s.Target = t
	if s.Lab.Name == "" {
		s.Lab.Name = t.Name
	}
}

func (c *decoder) targetNodes(s *Spec, p path, m map[string]any, str func(path, map[string]any, string, string) (string, bool)) []TargetNode {
	np := p.child("node")
	v, present := m["node"]
	if !present {
		c.failAt(p, "a target needs its servers: add [target.node.NAME] tables with role and dsn")
		return nil
	}
	nm, ok := c.table(np, v, "write one [target.node.NAME] table per server")
	if !ok {
		return nil
	}
	var nodes []TargetNode
	for _, name := range c.keysByPos(np, nm) {
		pp := np.child(name)
		c.remember(s, pp)
		n := TargetNode{Name: name, Line: c.d.line(pp)}
		if !nodeNameRE.MatchString(name) {
			c.failAt(pp, "node name must be 1 to 31 characters of a-z, 0-9 and '_', starting with a letter")
		}
		tm, ok := c.table(pp, nm[name], fmt.Sprintf("write [target.node.%s] with role and dsn", showKey(name)))
		if !ok {
			continue
		}
		c.checkKeys(pp, tm, targetNodeKeys, "[target.node."+showKey(name)+"]")
		if role, ok := str(pp, tm, "role", `"primary", "standby", "replica" or "master"`); ok {
			if !contains(targetRoles, role) {
				c.fail(pp.child("role"), tm["role"], "unknown role%s; target mode knows: %s", didYouMean(role, targetRoles), strings.Join(targetRoles, ", "))
			}
			n.Role = role
		} else if _, has := tm["role"]; !has {
			c.failAt(pp, `role is required: "primary", "standby", "replica" or "master"`)
		}
		n.From, _ = str(pp, tm, "from", `a node name like "eu1"`)
		if dsn, ok := str(pp, tm, "dsn", `a connection string like "host=10.0.0.5 port=5432 user=replab dbname=app"`); ok {
			n.DSN = dsn
		} else if _, has := tm["dsn"]; !has {
			c.failAt(pp, `dsn is required: how to reach the server from this host, e.g. "host=10.0.0.5 port=5432 user=replab dbname=app" (no password: see [target] password_file)`)
		}
		n.Site, _ = str(pp, tm, "site", `a site label like "us-east"`)
		if a, ok := str(pp, tm, "agent", `an address like "10.0.1.5:7070"`); ok {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				c.fail(pp.child("agent"), tm["agent"], `want host:port of a running replab agent, like "10.0.1.5:7070"`)
			}
			n.Agent = a
		}
		nodes = append(nodes, n)
	}
	c.checkTargetTopology(s, nodes)
	return nodes
}

// checkTargetTopology checks what the spec alone can: one primary, every
// replica's upstream named and known. The servers confirm the rest.
func (c *decoder) checkTargetTopology(s *Spec, nodes []TargetNode) {
	byName := map[string]*TargetNode{}
	var primaries, names []string
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
		names = append(names, nodes[i].Name)
		if nodes[i].Role == "primary" {
			primaries = append(primaries, nodes[i].Name)
		}
	}
	field := func(n TargetNode, key string) path { return path{"target", "node", n.Name, key} }
	var masters []string
	for _, n := range nodes {
		if n.Role == "master" {
			masters = append(masters, n.Name)
		}
	}
	if len(masters) > 0 {
		// A multi-master cluster (Galera): every node a master, each
		// receiving from all the others.
		for _, n := range nodes {
			switch {
			case n.Role != "master" && n.Role != "":
				c.failAt(field(n, "role"), "a %s beside masters (%s): target mode measures a cluster of masters alone", n.Role, strings.Join(masters, ", "))
			case n.From != "":
				c.failAt(field(n, "from"), "a master receives from every other master: remove from")
			}
		}
		if len(masters) < 2 {
			c.failAt(field(nodes[0], "role"), "one master alone replicates to nobody: name every member of the cluster")
		}
		return
	}
	if len(nodes) > 0 && len(primaries) == 0 {
		c.failAt(path{"target", "node"}, `no node has role = "primary": replab writes there`)
	}
	if len(primaries) > 1 {
		c.failAt(path{"target", "node", primaries[1], "role"}, "a second primary (%s is one): target mode measures one primary and its replicas", primaries[0])
	}
	for _, n := range nodes {
		switch {
		case n.Role == "primary" && n.From != "":
			c.failAt(field(n, "from"), "a primary replicates from no node: remove from")
		case n.Role != "primary" && n.Role != "" && n.From == "":
			c.failAt(path{"target", "node", n.Name}, "a %s needs from = the node it replicates from (one of: %s)", n.Role, strings.Join(names, ", "))
		case n.From != "" && byName[n.From] == nil:
			c.failAt(field(n, "from"), "unknown node%s; nodes: %s", didYouMean(n.From, names), strings.Join(names, ", "))
		case n.From == n.Name && n.From != "":
			c.failAt(field(n, "from"), "a node cannot replicate from itself")
		}
	}
	// A cycle of replicas would have no way to the primary.
	for _, n := range nodes {
		seen := map[string]bool{}
		for at := byName[n.Name]; at != nil && at.From != ""; at = byName[at.From] {
			if seen[at.Name] {
				c.failAt(field(n, "from"), "replicas replicate from each other in a cycle (%s): one of them must lead to the primary", n.Name)
				break
			}
			seen[at.Name] = true
		}
	}
}

package spec

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The cluster part of a spec: [engine], [node.NAME] and [scheme]. The spec
// checks structure (types, units, references between nodes and sites);
// which roles, schemes and commit levels go together is the engine's
// call (engine.Validate), pointed at the same file:line through Errorf.

var (
	engineKeys  = []string{"kind"}
	nodeKeys    = []string{"site", "role", "from", "apply_delay", "port", "storage", "settings", "table"}
	tableKeys   = []string{"name", "where", "columns"}
	schemeKeyRE = identRE
	nodeNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)
	identRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	settingRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]{0,62}$`) // JE's parameters are camelCase
	knownRoles  = []string{"primary", "standby", "replica", "master", "server", "electable", "secondary"}
	upstreamful = map[string]bool{"standby": true, "replica": true}
)

// Errorf makes an error pointing at a field of the spec, e.g.
// s.Errorf("scheme.commit", "…"): file:line: scheme.commit: …
func (s *Spec) Errorf(field, format string, args ...any) *Error {
	return &Error{File: s.name, Line: s.Line(field), Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Line returns the line a field was written on, or of its nearest written
// parent table, or 1.
func (s *Spec) Line(field string) int {
	for f := field; f != ""; {
		if l, ok := s.lines[f]; ok {
			return l
		}
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return 1
}

// WorstRoundTrip is the largest delay there and back of any link: what
// bounds waiting for a change to cross the lab.
func (s *Spec) WorstRoundTrip() time.Duration {
	var worst time.Duration
	for _, l := range s.Links {
		worst = max(worst, l.Forward.Delay+l.Reverse.Delay)
	}
	return worst
}

// Node returns the named node or nil.
func (s *Spec) Node(name string) *Node {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// remember records the line of p under its field name.
func (c *decoder) remember(s *Spec, p path) {
	if s.lines == nil {
		s.lines = map[string]int{}
	}
	s.lines[p.String()] = c.d.line(p)
}

func (c *decoder) cluster(root map[string]any, s *Spec) {
	if v, present := root["engine"]; present {
		p := path{"engine"}
		c.remember(s, p)
		if m, ok := c.table(p, v, `write [engine] with kind = "postgres"`); ok {
			c.checkKeys(p, m, engineKeys, "[engine]")
			s.Engine = &Engine{}
			if kv, ok := c.get(p, m, "kind", kString, `a string like "postgres"`); ok {
				s.Engine.Kind = strings.TrimSpace(kv.(string))
				c.remember(s, p.child("kind"))
			} else if _, present := m["kind"]; !present {
				c.failAt(p, `kind is required, e.g. kind = "postgres"`)
			}
		}
	}
	s.Nodes = c.nodes(root, s)
	if v, present := root["scheme"]; present {
		p := path{"scheme"}
		c.remember(s, p)
		if m, ok := c.table(p, v, `write [scheme] with replication = "async"`); ok {
			c.scheme(p, m, s)
		}
	}
	switch {
	case s.Engine == nil && len(s.Nodes) > 0:
		c.failAt(path{"node"}, `nodes need an engine: add [engine] with kind = "postgres"`)
	case s.Engine == nil && root["scheme"] != nil:
		c.failAt(path{"scheme"}, `a scheme needs an engine and nodes: add [engine] with kind = "postgres" and [node.NAME] tables`)
	case s.Engine != nil && len(s.Nodes) == 0:
		c.failAt(path{"engine"}, `an engine needs nodes: add [node.NAME] tables with site and role`)
	}
}

func (c *decoder) nodes(root map[string]any, s *Spec) []Node {
	v, present := root["node"]
	if !present {
		return nil
	}
	p := path{"node"}
	m, ok := c.table(p, v, "write one [node.NAME] table per database server")
	if !ok {
		return nil
	}
	var siteNames []string
	sites := map[string]bool{}
	for _, st := range s.Sites {
		sites[st.Name] = true
		siteNames = append(siteNames, st.Name)
	}
	names := c.keysByPos(p, m)
	var nodes []Node
	for _, name := range names {
		np := p.child(name)
		c.remember(s, np)
		n := Node{Name: name, Line: c.d.line(np)}
		if !nodeNameRE.MatchString(name) {
			c.failAt(np, "node name must be 1 to 31 characters of a-z, 0-9 and '_', starting with a letter (it names replication slots and standbys)")
		}
		nm, ok := c.table(np, m[name], fmt.Sprintf("write [node.%s] with site and role", showKey(name)))
		if !ok {
			continue
		}
		c.checkKeys(np, nm, nodeKeys, "[node."+showKey(name)+"]")
		str := func(key, want string) (string, bool) {
			v, ok := c.get(np, nm, key, kString, want)
			if !ok {
				return "", false
			}
			c.remember(s, np.child(key))
			return strings.TrimSpace(v.(string)), true
		}
		if site, ok := str("site", `a site name like "primary"`); ok {
			if !sites[site] {
				c.fail(np.child("site"), nm["site"], "unknown site%s; defined sites: %s", didYouMean(site, siteNames), strings.Join(siteNames, ", "))
			}
			n.Site = site
		} else if _, present := nm["site"]; !present {
			c.failAt(np, `site is required, e.g. site = "primary"`)
		}
		if role, ok := str("role", `one of "primary", "standby", "replica", "master", "server", "electable", "secondary"`); ok {
			if !contains(knownRoles, role) {
				c.fail(np.child("role"), nm["role"], "unknown role%s; roles: %s", didYouMean(role, knownRoles), strings.Join(knownRoles, ", "))
			}
			n.Role = role
		} else if _, present := nm["role"]; !present {
			c.failAt(np, `role is required: one of "primary", "standby", "replica", "master", "server", "electable", "secondary"`)
		}
		n.From, _ = str("from", `a node name like "p1"`)
		if v, ok := str("apply_delay", `a string with a unit, like "30s"`); ok {
			d, msg := parseDurationMax(v, 24*time.Hour)
			if msg != "" {
				c.fail(np.child("apply_delay"), nm["apply_delay"], "%s", msg)
			}
			n.ApplyDelay = d
		}
		if v, ok := c.get(np, nm, "port", kInt, "an integer port like 5432"); ok {
			c.remember(s, np.child("port"))
			if port := v.(int64); port < 1024 || port > 65535 {
				c.fail(np.child("port"), v, "want a port between 1024 and 65535")
			} else {
				n.Port = int(port)
			}
		}
		if v, ok := str("storage", `a storage name like "san"`); ok {
			n.Storage = v
		}
		n.Settings = c.settings(s, np, nm)
		n.Tables = c.tableFilters(s, np, nm)
		nodes = append(nodes, n)
	}
	c.checkUpstreams(s, nodes)
	return nodes
}

// settings reads [node.NAME.settings]: server settings passed through as
// text, so any setting the server knows can be given.
func (c *decoder) settings(s *Spec, np path, nm map[string]any) map[string]string {
	v, present := nm["settings"]
	if !present {
		return nil
	}
	sp := np.child("settings")
	m, ok := c.table(sp, v, `write [node.NAME.settings] with server settings, like shared_buffers = "128MB"`)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, k := range c.keysByPos(sp, m) {
		kp := sp.child(k)
		c.remember(s, kp)
		if !settingRE.MatchString(k) {
			c.failAt(kp, "not a server setting name (letters, digits, '_' and '.')")
			continue
		}
		switch x := m[k].(type) {
		case string:
			out[k] = x
		case int64:
			out[k] = strconv.FormatInt(x, 10)
		case float64:
			out[k] = strconv.FormatFloat(x, 'g', -1, 64)
		case bool:
			out[k] = map[bool]string{true: "on", false: "off"}[x]
		default:
			c.fail(kp, m[k], "want a string, number or boolean")
		}
	}
	return out
}

// tableFilters reads [[node.NAME.table]]: name, where, columns.
func (c *decoder) tableFilters(s *Spec, np path, nm map[string]any) []TableFilter {
	v, present := nm["table"]
	if !present {
		return nil
	}
	tp := np.child("table")
	arr, ok := v.([]any)
	if !ok {
		c.fail(tp, v, "want a list of tables: write each one as [[node.NAME.table]] with name, where and columns")
		return nil
	}
	var out []TableFilter
	seen := map[string]int{}
	for i, tv := range arr {
		ep := tp.child(idx(i))
		c.remember(s, ep)
		m, ok := c.table(ep, tv, "write each one as [[node.NAME.table]]")
		if !ok {
			continue
		}
		c.checkKeys(ep, m, tableKeys, "[[node.NAME.table]]")
		f := TableFilter{Line: c.d.line(ep)}
		if nv, ok := c.get(ep, m, "name", kString, `a table name like "per"`); ok {
			f.Table = strings.TrimSpace(nv.(string))
			if !identRE.MatchString(f.Table) {
				c.fail(ep.child("name"), nv, "not a table name (letters, digits and '_', up to 63)")
			} else if j, dup := seen[strings.ToLower(f.Table)]; dup {
				c.fail(ep.child("name"), nv, "table listed twice (first at line %d)", out[j].Line)
			} else {
				seen[strings.ToLower(f.Table)] = len(out)
			}
		} else if _, present := m["name"]; !present {
			c.failAt(ep, `name is required, e.g. name = "per"`)
		}
		if wv, ok := c.get(ep, m, "where", kString, `a SQL condition like "region = 'eu'"`); ok {
			f.Where = strings.TrimSpace(wv.(string))
			if f.Where == "" || strings.Contains(f.Where, ";") {
				c.fail(ep.child("where"), wv, "want one SQL condition without ';', like \"region = 'eu'\"")
			}
		}
		if cv, present := m["columns"]; present {
			cols, ok := cv.([]any)
			if !ok || len(cols) == 0 {
				c.fail(ep.child("columns"), cv, `want a list of column names, like ["per_id", "last_name"]`)
			}
			for _, col := range cols {
				name, ok := col.(string)
				if !ok || !identRE.MatchString(name) {
					c.fail(ep.child("columns"), cv, `want a list of column names, like ["per_id", "last_name"]`)
					break
				}
				f.Columns = append(f.Columns, name)
			}
		}
		out = append(out, f)
	}
	return out
}

// checkUpstreams checks every from: it names another node, and following
// from never loops.
func (c *decoder) checkUpstreams(s *Spec, nodes []Node) {
	byName := map[string]*Node{}
	var names []string
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
		names = append(names, nodes[i].Name)
	}
	sort.Strings(names)
	for i := range nodes {
		n := &nodes[i]
		fp := path{"node", n.Name, "from"}
		switch {
		case n.From == "" && upstreamful[n.Role]:
			c.failAt(path{"node", n.Name}, "a %s needs from = \"NODE\": the node it replicates from", n.Role)
		case n.From == "":
		case byName[n.From] == nil:
			c.failAt(fp, "unknown node %q%s; nodes: %s", clean(n.From), didYouMean(n.From, names), strings.Join(names, ", "))
		case n.From == n.Name:
			c.failAt(fp, "a node cannot replicate from itself")
		default:
			seen := map[string]bool{n.Name: true}
			for up := byName[n.From]; up != nil; up = byName[up.From] {
				if seen[up.Name] {
					c.failAt(fp, "replication loops back to %s; follow from to a primary", up.Name)
					break
				}
				seen[up.Name] = true
			}
		}
	}
}

// scheme reads [scheme]: replication, and every other key as an option
// for the engine to check (Spec.SchemeOptions).
func (c *decoder) scheme(p path, m map[string]any, s *Spec) {
	sc := &s.Scheme
	sc.Options = map[string]any{}
	for _, k := range c.keysByPos(p, m) {
		c.remember(s, p.child(k))
		if k == "replication" {
			continue
		}
		if !schemeKeyRE.MatchString(k) {
			c.failAt(p.child(k), "not an option name")
			continue
		}
		sc.Options[k] = m[k]
	}
	if v, ok := c.get(p, m, "replication", kString, `a string like "async", "sync", "logical", "snapshot" or "multimaster"`); ok {
		sc.Replication = strings.TrimSpace(v.(string))
	}
}

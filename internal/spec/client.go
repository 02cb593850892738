package spec

import (
	"fmt"
	"strings"
)

// Clients: [[client]] groups of users, each in a site of its own, with
// where they write and read (issue 32: users in several regions, as the
// DIMHRS study's regional users). Without any, every user runs in
// [run] client.
//
//	[[client]]
//	name = "eu"          # default: the site's name
//	site = "frankfurt"
//	users = 8            # closed-loop users of this group
//	writes = "nearest"   # "nearest" (default: the source in the group's site, else user i's mod n), "source", "none"
//	reads = "nearest"    # "nearest": the replica in the group's site, else the workload's place;
//	                     # "replica", "source", "workload" (default: as the workload says), "none"

// Client is one [[client]] group.
type Client struct {
	Name  string
	Site  string
	Users int
	// Writes: where the group's writing transactions run (ClientNearest,
	// ClientSource) or ClientNone (the group runs none).
	Writes string
	// Reads: where its read-only transactions run (ClientNearest,
	// ClientReplica, ClientSource, ClientWorkload) or ClientNone.
	Reads string
	Line  int
}

// Client placements.
const (
	ClientNearest  = "nearest"
	ClientSource   = "source"
	ClientReplica  = "replica"
	ClientWorkload = "workload"
	ClientNone     = "none"
)

var (
	clientKeys   = []string{"name", "site", "users", "writes", "reads"}
	clientWrites = []string{ClientNearest, ClientSource, ClientNone}
	clientReads  = []string{ClientWorkload, ClientNearest, ClientReplica, ClientSource, ClientNone}
)

// clients reads [[client]]. [run] users is then their sum; [run] client,
// rate and a search by users do not go with them.
func (c *decoder) clients(root map[string]any, s *Spec) {
	v, present := root["client"]
	if !present {
		return
	}
	p := path{"client"}
	arr, ok := v.([]any)
	if !ok {
		c.fail(p, v, "want a list of client groups: write each one as [[client]] (double brackets)")
		return
	}
	var sites []string
	for _, st := range s.Sites {
		sites = append(sites, st.Name)
	}
	names := map[string]int{}
	total := 0
	for i, cv := range arr {
		cp := p.child(idx(i))
		c.remember(s, cp)
		m, ok := c.table(cp, cv, "write each group as a [[client]] table")
		if !ok {
			continue
		}
		c.checkKeys(cp, m, clientKeys, "[[client]]")
		cl := Client{Users: 1, Writes: ClientNearest, Reads: ClientWorkload, Line: c.d.line(cp)}
		if v, ok := c.get(cp, m, "site", kString, `a site name like "frankfurt"`); ok {
			cl.Site = strings.TrimSpace(v.(string))
			if !contains(sites, cl.Site) && s.Target == nil {
				c.fail(cp.child("site"), v, "unknown site%s; defined sites: %s", didYouMean(cl.Site, sites), strings.Join(sites, ", "))
			}
		} else if _, present := m["site"]; !present {
			c.failAt(cp, `site is required: where the group's users run, e.g. site = "frankfurt"`)
		}
		cl.Name = cl.Site
		if v, ok := c.get(cp, m, "name", kString, `a name like "eu"`); ok {
			cl.Name = strings.TrimSpace(v.(string))
			if !identRE.MatchString(cl.Name) {
				c.fail(cp.child("name"), v, "want letters, digits, '_' and '-'")
			}
		}
		if j, dup := names[cl.Name]; dup && cl.Name != "" {
			c.failAt(cp, "a second group named %q (the first is client[%d]); give each a name of its own", cl.Name, j+1)
		}
		names[cl.Name] = i
		if v, ok := c.get(cp, m, "users", kInt, "a whole number of users, like 8"); ok {
			if n := v.(int64); n < 1 || n > 10000 {
				c.fail(cp.child("users"), v, "want between 1 and 10000 users")
			} else {
				cl.Users = int(n)
			}
		}
		if v, ok := c.get(cp, m, "writes", kString, `"nearest", "source" or "none"`); ok {
			w := strings.TrimSpace(v.(string))
			if !contains(clientWrites, w) {
				c.fail(cp.child("writes"), v, `want "nearest" (the source in the group's site, else user i's of the sources), "source" (user i's of the sources, wherever they are) or "none" (the group only reads)%s`, didYouMean(w, clientWrites))
			} else {
				cl.Writes = w
			}
		}
		if v, ok := c.get(cp, m, "reads", kString, `"workload", "nearest", "replica", "source" or "none"`); ok {
			r := strings.TrimSpace(v.(string))
			if !contains(clientReads, r) {
				c.fail(cp.child("reads"), v, `want "workload" (where the workload's reads_at says), "nearest" (the replica in the group's site, else the workload's place), "replica", "source" or "none" (the group only writes)%s`, didYouMean(r, clientReads))
			} else {
				cl.Reads = r
			}
		}
		if cl.Reads == ClientNone && cl.Writes == ClientNone {
			c.failAt(cp, `a group that neither reads nor writes does nothing: drop it, or give it reads or writes`)
		}
		total += cl.Users
		s.Clients = append(s.Clients, cl)
	}
	if len(s.Clients) == 0 {
		return
	}
	if rv, ok := root["run"].(map[string]any); ok {
		rp := path{"run"}
		for _, k := range []string{"users", "client", "rate"} {
			if _, written := rv[k]; written {
				why := map[string]string{
					"users":  "the users are the [[client]] groups' (their sum)",
					"client": "each [[client]] group names its own site",
					"rate":   "[[client]] groups are closed-loop users: give each its users (think sets their pace)",
				}[k]
				c.failAt(rp.child(k), "not with [[client]] groups: %s", why)
			}
		}
		if sr := s.Run.Search; sr != nil && sr.By == SearchUsers {
			c.failAt(rp.child("search"), "a search by users varies [run] users: not with [[client]] groups")
		}
	}
	if s.Target != nil {
		c.failAt(p, "[[client]] groups place users in the lab's sites: not in target mode")
	}
	s.Run.Users = total
}

// ClientOf is the group of user u (0 … Run.Users-1), users numbered
// group after group in the order written; nil without groups.
func (s *Spec) ClientOf(u int) *Client {
	for i := range s.Clients {
		if u < s.Clients[i].Users {
			return &s.Clients[i]
		}
		u -= s.Clients[i].Users
	}
	return nil
}

// String is the group as validate prints it.
func (cl Client) String() string {
	return fmt.Sprintf("client %-10s site %-10s users %d, writes %s, reads %s", cl.Name, cl.Site, cl.Users, cl.Writes, cl.Reads)
}

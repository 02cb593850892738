package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/workload"
)

// Where the users' transactions go: the topology comes from the engine
// (which nodes take writes, which receive from which), never from role
// names.

// ownWriters is, for a source that is also watched (a multi-master node),
// the users that write at it: the driver gives user i source i mod n.
// Their changes are local there, not replicated, so that node skips them.
func (r *run) ownWriters(node string) func(int) bool {
	for _, src := range r.sources {
		if src.Name == node {
			return func(w int) bool { return r.writerSource(w) == node }
		}
	}
	return nil
}

func (r *run) clientSite() string {
	if r.s.Target != nil {
		return r.targetSite()
	}
	if r.s.Run.Client != "" {
		return r.s.Run.Client
	}
	if _, ok := r.cluster.(engine.PageServer); ok {
		// A page server's clients are remote: the first site without a
		// node, so that reads cross a link.
		for _, st := range r.s.Sites {
			if !r.hasNode(st.Name) {
				return st.Name
			}
		}
	}
	return r.sources[0].Site
}

func (r *run) hasNode(site string) bool {
	for _, n := range r.nodes {
		if n.Site == site {
			return true
		}
	}
	return false
}

// dialer makes connections from the client's site; in an offline lab
// (no namespaces), from this process.
func (r *run) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if r.lab == nil {
		var d net.Dialer // target mode: from this host
		return d.DialContext
	}
	if st := r.lab.Site(r.client); st != nil && !r.opt.Offline {
		return st.DialContext
	}
	var d net.Dialer
	return d.DialContext
}

func names(ns []engine.Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// pools opens a pool per node the workload's transaction types use, all
// dialled from the client site, and says which one each user gets for a
// type's place (workload.TxType.At):
//
//   - the source: user i writes at source i mod n;
//   - a replica: the one in the client's site if there is one (a reader
//     near its data), else replica i mod n;
//   - a named site: the node there that takes no writes, if any, else the
//     one that does.
//
// A user whose node failed it (driver.Pools' tries) gets the next one
// of the same kind, as a client with a list of nodes tries them in turn:
// a Galera member cut off from the primary component sends its users to
// the others.
//
// nodeOf names the node behind one of the pools, for the history.
func (r *run) pools(ctx context.Context) (t driver.Pools, nodeOf func(*sql.DB) string, closeAll func(), err error) {
	sc, ok := r.cluster.(engine.SQL)
	if !ok {
		return nil, nil, nil, fmt.Errorf("engine %s has no SQL: the %s workload cannot run on it", r.eng.Kind(), r.wl.Name())
	}
	// Users call pools at once when they reconnect (after a failover,
	// every user of the lost node): the pools are shared under mu.
	var mu sync.Mutex
	pools := map[string]*sql.DB{}
	var route *sql.DB
	closeAll = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, db := range pools {
			db.Close()
		}
		if route != nil {
			route.Close()
		}
	}
	nodeOf = func(db *sql.DB) string {
		mu.Lock()
		defer mu.Unlock()
		for name, p := range pools {
			if p == db {
				node, _, _ := strings.Cut(name, "@")
				return node
			}
		}
		return ""
	}
	// A pool per node and the site its users dial from ([[client]]
	// groups run in sites of their own), named by node (and site).
	open := func(n engine.Node, from string) (*sql.DB, error) {
		key := n.Name
		if from != r.client {
			key = n.Name + "@" + from
		}
		mu.Lock()
		db := pools[key]
		mu.Unlock()
		if db != nil {
			return db, nil
		}
		db, err := sc.Open(ctx, n.Name, from)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(r.s.Run.Users + 2)
		mu.Lock()
		defer mu.Unlock()
		if had := pools[key]; had != nil {
			db.Close() // another user opened it meanwhile
			return had, nil
		}
		pools[key] = db
		return db, nil
	}
	// A cluster whose clients find the primary by a route of their own
	// (an HA manager's: a libpq host list, a proxy, a fixed node): every
	// user writes through its pool, and it decides where writes go.
	if rt, ok := r.cluster.(engine.Router); ok {
		db, err := rt.RoutePool(ctx, r.client)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("route: %w", err)
		}
		if db != nil {
			db.SetMaxOpenConns(r.s.Run.Users + 2)
			route = db
			fmt.Fprintf(r.log, "clients find the primary by route: %s\n", rt.Route())
		}
	}
	pick := func(user, tries int, at string) (engine.Node, error) {
		site := r.userSite(user)
		switch {
		case strings.HasPrefix(at, atSourceIn):
			return r.writeSource(user, tries, strings.TrimPrefix(at, atSourceIn))
		case at == workload.AtSource:
			// The sources now: after a failover, the promoted node (a
			// user that lost its connection comes back through here).
			srcs := engine.Sources(r.cluster.Nodes())
			if len(srcs) == 0 {
				return engine.Node{}, errors.New("no node takes writes now")
			}
			return srcs[(user+tries)%len(srcs)], nil
		case at == workload.AtReplica:
			if len(r.replicas) == 0 {
				return engine.Node{}, errors.New("transactions at a replica, but no node replicates from another")
			}
			if tries == 0 {
				for _, n := range r.replicas {
					if n.Site == site {
						return n, nil
					}
				}
			}
			return r.replicas[(user+tries)%len(r.replicas)], nil
		case strings.HasPrefix(at, "site:"):
			site := strings.TrimPrefix(at, "site:")
			var found []engine.Node
			for _, n := range r.nodes {
				if n.Site == site {
					found = append(found, n)
				}
			}
			if len(found) == 0 {
				return engine.Node{}, fmt.Errorf("transactions at site %s, which has no node", site)
			}
			for _, n := range found {
				if !n.Writable {
					return n, nil
				}
			}
			return found[0], nil
		}
		return engine.Node{}, fmt.Errorf("transactions at %q: want the source, a replica or site:NAME", at)
	}
	// Check every place now, so that a workload that cannot run here fails
	// before the clock starts.
	for _, t := range r.wl.Transactions() {
		if _, err := pick(0, 0, t.At); err != nil {
			return nil, nil, nil, fmt.Errorf("transaction %s: %w", t.Name, err)
		}
	}
	poolFor := func(user, tries int, at string) (*sql.DB, error) {
		if route != nil && at == workload.AtSource {
			return route, nil
		}
		n, err := pick(user, tries, at)
		if err != nil {
			return nil, err
		}
		return open(n, r.userSite(user))
	}
	return poolFor, nodeOf, closeAll, nil
}

// siteDo runs functions inside a site's namespace; nil offline.
func (r *run) siteDo() func(site string, f func() error) error {
	if r.opt.Offline || r.lab == nil {
		return nil
	}
	return func(site string, f func() error) error {
		st := r.lab.Site(site)
		if st == nil {
			return fmt.Errorf("no site %s", site)
		}
		return st.Do(f)
	}
}

// setTrafficClasses tells the lab's links which packets are replication,
// client and storage traffic (the links' bytes_by_class): the nodes'
// server ports and sites, and the sites users run in.
func (r *run) setTrafficClasses() {
	if r.lab == nil || r.s.Target != nil {
		return
	}
	var servers []netip.AddrPort
	var nodeSites, clientSites []string
	for _, n := range r.nodes {
		if n.Addr.IsValid() {
			servers = append(servers, n.Addr)
		}
		if n.Site != "" {
			nodeSites = append(nodeSites, n.Site)
		}
	}
	if r.client != "" {
		clientSites = append(clientSites, r.client)
	}
	for _, c := range r.s.Clients {
		clientSites = append(clientSites, c.Site)
	}
	r.lab.SetTrafficClasses(servers, nodeSites, clientSites)
}

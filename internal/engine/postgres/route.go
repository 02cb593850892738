package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"replab/internal/engine"
)

// How clients of a managed cluster find the primary ([scheme] route,
// engine.Router), and which node a client's connection reached
// (engine.ConnPlacer).

var (
	_ engine.Router     = (*cluster)(nil)
	_ engine.ConnPlacer = (*cluster)(nil)
)

// libpqConnectTimeout bounds each host's attempt in a host list: libpq
// waits for ever by default, and a host behind a partition then holds the
// client at the first host of its list.
const libpqConnectTimeout = "2"

// Route implements engine.Router.
func (c *cluster) Route() string {
	switch c.plan.route {
	case RouteLibpq:
		return fmt.Sprintf("libpq host list %s with target_session_attrs=read-write, connect_timeout=%s s", strings.Join(c.nodeNames(), ", "), libpqConnectTimeout)
	case RouteHAProxy:
		if c.plan.manager != nil && c.plan.manager.kind == ManagerPgAF {
			return "haproxy in the clients' site, health-checking each node's state at pg_auto_failover's monitor (inter 3s fall 3 rise 2)"
		}
		return "haproxy in the clients' site, health-checking each Patroni's GET /primary (inter 3s fall 3 rise 2)"
	case RouteDirect:
		if c.plan.manager != nil {
			return "direct to " + c.firstPrimary() + ", the spec's primary, whatever the manager does"
		}
	}
	return "direct to the node that takes writes now"
}

// RoutePool implements engine.Router: under a manager, clients use the
// route; without one (nil, nil) replab points them at the primary it
// knows.
func (c *cluster) RoutePool(ctx context.Context, fromSite string) (*sql.DB, error) {
	if c.plan.manager == nil {
		return nil, nil
	}
	switch c.plan.route {
	case RouteDirect:
		return c.Open(ctx, c.firstPrimary(), fromSite)
	case RouteLibpq:
		site := c.lab.Site(fromSite)
		if site == nil {
			return nil, fmt.Errorf("no site %q", fromSite)
		}
		var hosts, ports []string
		for _, n := range c.nodes {
			hosts = append(hosts, n.addr.Addr().String())
			ports = append(ports, fmt.Sprint(n.addr.Port()))
		}
		dsn := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=%s",
			strings.Join(hosts, ","), strings.Join(ports, ","), Superuser, Database, libpqConnectTimeout)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		cfg.DialFunc = dialer(site)
		return stdlib.OpenDB(*cfg), nil
	case RouteHAProxy:
		p, err := c.proxyFor(ctx, fromSite)
		if err != nil {
			return nil, err
		}
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable connect_timeout=%s",
			p.addr.Addr(), p.addr.Port(), Superuser, Database, libpqConnectTimeout))
		if err != nil {
			return nil, err
		}
		cfg.DialFunc = dialer(c.lab.Site(fromSite))
		return stdlib.OpenDB(*cfg), nil
	}
	return nil, fmt.Errorf("route %q is not built", c.plan.route)
}

// firstPrimary is the spec's primary: the node that bootstrapped.
func (c *cluster) firstPrimary() string {
	for _, n := range c.lab.Spec.Nodes {
		if n.Role == "primary" {
			return n.Name
		}
	}
	return ""
}

func (c *cluster) nodeNames() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Name)
	}
	return out
}

// ConnNode implements engine.ConnPlacer: the node whose address the
// connection reached.
func (c *cluster) ConnNode(conn any) string {
	var addr net.Addr
	switch x := conn.(type) {
	case *stdlib.Conn:
		addr = x.Conn().PgConn().Conn().RemoteAddr()
	case interface{ RemoteAddr() net.Addr }:
		addr = x.RemoteAddr()
	}
	if addr != nil {
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			if name := c.nodeAt(ap); name != "" {
				return name
			}
		}
	}
	// Behind a proxy (route = "haproxy") the address is the proxy's: the
	// server says its name (replab.node, set on Patroni's and repmgr's
	// nodes), or the address it was reached at (pg_auto_failover's nodes
	// share one configuration: none has a name of its own).
	switch x := conn.(type) {
	case *stdlib.Conn:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var name, host *string
		var port *int32
		if x.Conn().QueryRow(ctx, "SELECT current_setting('replab.node', true), host(inet_server_addr()), inet_server_port()").Scan(&name, &host, &port) == nil {
			if name != nil && *name != "" {
				return *name
			}
			if host != nil && port != nil {
				if a, err := netip.ParseAddr(*host); err == nil {
					return c.nodeAt(netip.AddrPortFrom(a, uint16(*port)))
				}
			}
		}
	case interface {
		ServerNode() string
		ServerAddr() string
	}:
		if name := x.ServerNode(); name != "" {
			return name
		}
		if ap, err := netip.ParseAddrPort(x.ServerAddr()); err == nil {
			return c.nodeAt(ap)
		}
	case interface{ ServerNode() string }:
		return x.ServerNode()
	}
	return ""
}

// nodeAt is the node listening at ap, or "".
func (c *cluster) nodeAt(ap netip.AddrPort) string {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for _, n := range c.nodes {
		if n.addr == ap {
			return n.Name
		}
	}
	return ""
}

package postgres

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// route = "haproxy": Debian's haproxy in the clients' site, in front of
// every node, with the check timings of Patroni's own haproxy.cfg
// template: every 3 s, down after 3 failures, up after 2 successes, and
// the sessions of a server marked down shut. What it checks is the
// manager's view of the primary: under Patroni each Patroni's REST API
// (GET /primary answers 200 at the leader only); under pg_auto_failover,
// which has no such API, the monitor's state of the node, read by a
// script haproxy runs for each check (external-check) from the clients'
// site: up while the monitor has assigned and the node reported a
// primary's state. Clients dial the proxy from their site; it forwards to
// whichever node passes.

const (
	haproxyBin  = "/usr/sbin/haproxy"
	haproxyPort = 5000
)

// proxy is one haproxy in a client site.
type proxy struct {
	site string
	addr netip.AddrPort
	cfg  string
	log  string
	proc *enginekit.Proc
}

// haproxyConfig is the proxy's configuration for the cluster's nodes.
func (c *cluster) haproxyConfig(addr netip.AddrPort, check string) string {
	var b strings.Builder
	b.WriteString(`# written by replab: clients reach the primary through here (route = "haproxy")
global
    maxconn 1000
`)
	if check != "" {
		b.WriteString("    external-check\n    insecure-fork-wanted\n")
	}
	b.WriteString(`defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout check 2s
listen primary
`)
	fmt.Fprintf(&b, "    bind %s\n", addr)
	if check != "" {
		fmt.Fprintf(&b, `    option external-check
    external-check path "/usr/bin:/bin"
    external-check command %s
    default-server inter 3s fall 3 rise 2 on-marked-down shutdown-sessions
`, check)
		for _, n := range c.nodes {
			fmt.Fprintf(&b, "    server %s %s check\n", n.Name, n.addr)
		}
		return b.String()
	}
	b.WriteString(`    option httpchk GET /primary
    http-check expect status 200
    default-server inter 3s fall 3 rise 2 on-marked-down shutdown-sessions
`)
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "    server %s %s check addr %s port %d\n", n.Name, n.addr, n.ha.rest.Addr(), n.ha.rest.Port())
	}
	return b.String()
}

// pgafCheckScript is haproxy's check of a node under pg_auto_failover
// (HAPROXY_SERVER_NAME is the node): it passes while the monitor has
// assigned the node a primary's state and the node reported it.
func (c *cluster) pgafCheckScript() string {
	states := "'" + strings.Join(pgafPrimaryStates, "', '") + "'"
	return fmt.Sprintf(`#!/bin/sh
# written by replab: haproxy's check of node $HAPROXY_SERVER_NAME under pg_auto_failover
r=$(%s "host=%s port=%d user=%s dbname=%s connect_timeout=2" -AtXc "SELECT 1 FROM pgautofailover.node WHERE nodename = '$HAPROXY_SERVER_NAME' AND goalstate IN (%s) AND reportedstate IN (%s)" 2>/dev/null)
[ "$r" = 1 ]
`, c.inst.bin("psql"), c.monitor.addr.Addr(), c.monitor.addr.Port(), pgafMonitorUser, pgafMonitorDB, states, states)
}

// startProxy runs haproxy in site as the server user and waits until it
// accepts connections.
func (c *cluster) startProxy(ctx context.Context, siteName string) (*proxy, error) {
	if _, err := os.Stat(haproxyBin); err != nil {
		return nil, fmt.Errorf("haproxy is not installed (%s): run scripts/deps.sh ha, or apt-get install haproxy", haproxyBin)
	}
	site := c.lab.Site(siteName)
	if site == nil {
		return nil, fmt.Errorf("no site %q", siteName)
	}
	root, err := c.lab.DataDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "haproxy-"+siteName)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := enginekit.MkdirOwned(dir, c.uid, c.gid); err != nil {
		return nil, err
	}
	p := &proxy{site: siteName, addr: netip.AddrPortFrom(site.Address, haproxyPort), cfg: filepath.Join(dir, "haproxy.cfg"), log: filepath.Join(dir, "haproxy.log")}
	var check string
	checks := "each Patroni's GET /primary"
	if c.plan.manager.kind == ManagerPgAF {
		check = filepath.Join(dir, "check-pgaf.sh")
		if err := os.WriteFile(check, []byte(c.pgafCheckScript()), 0o755); err != nil {
			return nil, err
		}
		checks = "each node's state at pg_auto_failover's monitor"
	}
	if err := os.WriteFile(p.cfg, []byte(c.haproxyConfig(p.addr, check)), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, haproxyBin, "-c", "-f", p.cfg).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy in %s: configuration refused: %v: %s", siteName, err, enginekit.LastLines(string(out), 4))
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(haproxyBin, "-db", "-f", p.cfg)
	c.asServerUser(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	if p.proc, err = enginekit.StartProc(site, cmd); err != nil {
		return nil, fmt.Errorf("start haproxy in %s: %w", siteName, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := site.DialContext(ctx, "tcp", p.addr.String())
		if err == nil {
			conn.Close()
			break
		}
		if st := p.proc.ExitStatus(); st != "" {
			return nil, fmt.Errorf("haproxy in %s exited (%s): %s", siteName, st, tailFile(p.log, 4))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.proc.Stop(syscall.SIGTERM, 5*time.Second)
			return nil, fmt.Errorf("haproxy in %s does not accept connections on %s: %v", siteName, p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(c.log, "route: haproxy %s in %s, checking %s every 3 s (down after 3 failures, up after 2)\n", p.addr, siteName, checks)
	return p, nil
}

// proxyFor is site's proxy, started on first use.
func (c *cluster) proxyFor(ctx context.Context, site string) (*proxy, error) {
	c.proxyMu.Lock()
	defer c.proxyMu.Unlock()
	if p := c.proxies[site]; p != nil && p.proc.PID() != 0 {
		return p, nil
	}
	p, err := c.startProxy(ctx, site)
	if err != nil {
		return nil, err
	}
	if c.proxies == nil {
		c.proxies = map[string]*proxy{}
	}
	c.proxies[site] = p
	return p, nil
}

// stopProxies stops every proxy.
func (c *cluster) stopProxies() {
	c.proxyMu.Lock()
	defer c.proxyMu.Unlock()
	for _, p := range c.proxies {
		p.proc.Stop(syscall.SIGTERM, 5*time.Second)
	}
}

// proxyProcesses are the proxies' processes, role "haproxy".
func (c *cluster) proxyProcesses() []engine.Process {
	c.proxyMu.Lock()
	defer c.proxyMu.Unlock()
	var out []engine.Process
	for site, p := range c.proxies {
		if pid := p.proc.PID(); pid != 0 {
			out = append(out, engine.Process{Node: "haproxy-" + site, Role: "haproxy", PID: pid})
		}
	}
	return out
}

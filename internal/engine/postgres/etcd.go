package postgres

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// The manager's store: an etcd cluster of one member per store site
// (Debian's etcd-server 3.4), run by replab in those sites as the server
// user, so that a partition splits the store as it splits the nodes.

// etcd's ports on a store site's address.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
)

// etcdBin is Debian's etcd-server binary.
const etcdBin = "/usr/bin/etcd"

// store is the running etcd cluster.
type store struct {
	members []*etcdMember
	log     io.Writer
}

// etcdMember is one etcd server in a site.
type etcdMember struct {
	name    string // the site's name
	site    *lab.Site
	client  netip.AddrPort
	peer    netip.AddrPort
	dataDir string
	logPath string
	proc    *enginekit.Proc
}

// endpoints are the members' client addresses ("198.18.0.1:2379").
func (s *store) endpoints() []string {
	var out []string
	for _, m := range s.members {
		out = append(out, m.client.String())
	}
	return out
}

// etcdTimings are the members' heartbeat and election timeout for the
// store's worst round trip: etcd wants the heartbeat about one round trip
// and the election timeout ten heartbeats (its tuning guide); on a LAN
// its defaults, 100 ms and 1 s.
func etcdTimings(rtt time.Duration) (heartbeat, election time.Duration) {
	heartbeat = max(100*time.Millisecond, rtt.Round(time.Millisecond))
	return heartbeat, 10 * heartbeat
}

// startStore starts one etcd member in each of sites and waits until every
// one is healthy (the cluster has a leader). On error nothing it started
// remains.
func (c *cluster) startStore(ctx context.Context, sites []string) (_ *store, err error) {
	if _, err := os.Stat(etcdBin); err != nil {
		return nil, fmt.Errorf("etcd is not installed (%s): run scripts/deps.sh ha, or apt-get install etcd-server", etcdBin)
	}
	root, err := c.lab.DataDir()
	if err != nil {
		return nil, err
	}
	st := &store{log: c.log}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	var initial []string
	for _, name := range sites {
		site := c.lab.Site(name)
		if site == nil {
			return nil, fmt.Errorf("store: no site %s", name)
		}
		m := &etcdMember{
			name:    name,
			site:    site,
			client:  netip.AddrPortFrom(site.Address, etcdClientPort),
			peer:    netip.AddrPortFrom(site.Address, etcdPeerPort),
			dataDir: filepath.Join(root, "etcd-"+name),
			logPath: filepath.Join(root, "etcd-"+name+".log"),
		}
		if err := os.RemoveAll(m.dataDir); err != nil {
			return nil, err
		}
		if err := enginekit.MkdirOwned(m.dataDir, c.uid, c.gid); err != nil {
			return nil, err
		}
		st.members = append(st.members, m)
		initial = append(initial, name+"=http://"+m.peer.String())
	}
	var rtt time.Duration
	for _, a := range sites {
		for _, b := range sites {
			if a < b {
				rtt = max(rtt, roundTrip(c.lab.Spec, a, b))
			}
		}
	}
	hb, el := etcdTimings(rtt)
	start := time.Now()
	for _, m := range st.members {
		if err := m.start(c, strings.Join(initial, ","), "new", hb, el); err != nil {
			return nil, err
		}
	}
	for _, m := range st.members {
		if err := m.waitHealthy(ctx, 60*time.Second+20*rtt); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(c.log, "store: etcd %s in %s healthy (heartbeat %s, election timeout %s; %.2f s)\n",
		etcdVersion(), strings.Join(sites, ", "), hb, el, time.Since(start).Seconds())
	return st, nil
}

// start runs the member in its site as the server user. A member started
// again (after a kill) rejoins from its data directory: the initial
// cluster is read only on the first start.
func (m *etcdMember) start(c *cluster, initial, state string, hb, el time.Duration) error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(etcdBin,
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", "http://"+m.client.String(),
		"--advertise-client-urls", "http://"+m.client.String(),
		"--listen-peer-urls", "http://"+m.peer.String(),
		"--initial-advertise-peer-urls", "http://"+m.peer.String(),
		"--initial-cluster", initial,
		"--initial-cluster-state", state,
		"--initial-cluster-token", "replab-"+c.lab.Spec.Lab.Name,
		"--heartbeat-interval", strconv.FormatInt(hb.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(el.Milliseconds(), 10),
		// A lab's store is small and short-lived: no fsync storms, no
		// snapshots worth keeping.
		"--unsafe-no-fsync",
		"--snapshot-count", "10000",
		"--log-outputs", "stderr",
	)
	c.asServerUser(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := enginekit.StartProc(m.site, cmd)
	if err != nil {
		return fmt.Errorf("store: start etcd in %s: %w", m.name, err)
	}
	m.proc = p
	return nil
}

// waitHealthy polls the member's /health from its own site.
func (m *etcdMember) waitHealthy(ctx context.Context, bound time.Duration) error {
	hc := siteHTTP(m.site, 2*time.Second)
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	_, err := enginekit.Poll{Interval: 50 * time.Millisecond, Stall: bound}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		if st := m.proc.ExitStatus(); st != "" {
			return false, "", fmt.Errorf("etcd in %s exited (%s): %s", m.name, st, tailFile(m.logPath, 4))
		}
		body, code, err := httpGet(ctx, hc, "http://"+m.client.String()+"/health")
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK && strings.Contains(body, `"true"`), fmt.Sprintf("health %d %s", code, strings.TrimSpace(body)), nil
	})
	if err != nil {
		return fmt.Errorf("store: etcd in %s not healthy: %w (%s)", m.name, err, tailFile(m.logPath, 3))
	}
	return nil
}

// stop ends every member: SIGTERM, SIGKILL after 5 s.
func (s *store) stop() {
	if s == nil {
		return
	}
	for _, m := range s.members {
		m.proc.Stop(syscall.SIGTERM, 5*time.Second)
	}
}

// processes are the members' processes, role "etcd", each under its
// site's name (a store member is not a node).
func (s *store) processes() []engine.Process {
	if s == nil {
		return nil
	}
	var out []engine.Process
	for _, m := range s.members {
		if pid := m.proc.PID(); pid != 0 {
			out = append(out, engine.Process{Node: "etcd-" + m.name, Role: "etcd", PID: pid})
		}
	}
	return out
}

func etcdVersion() string {
	out, err := exec.Command(etcdBin, "--version").Output()
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// siteHTTP is an HTTP client whose connections are made from inside site.
func siteHTTP(site *lab.Site, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DialContext: site.DialContext, DisableKeepAlives: false, MaxIdleConnsPerHost: 2},
	}
}

// httpGet returns the body and status of a GET.
func httpGet(ctx context.Context, hc *http.Client, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, err
}

// roundTrip is the delay there and back between two sites joined by a
// link; the spec's worst round trip for sites that are not.
func roundTrip(s *spec.Spec, a, b string) time.Duration {
	for _, l := range s.Links {
		if l.A == a && l.B == b || l.A == b && l.B == a {
			return l.Forward.Delay + l.Reverse.Delay
		}
	}
	return s.WorstRoundTrip()
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return enginekit.LastLines(string(b), n)
}

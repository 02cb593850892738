package enginekit

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"syscall"

	"replab/internal/lab"
)

// What engines that run servers in a lab's sites share.

// ServerUser runs every database server of every lab (lab.ServerUser).
const ServerUser = lab.ServerUser

// ServerCredentials returns the uid and gid of ServerUser, creating the
// user if it is missing (lab.ServerCredentials).
func ServerCredentials(ctx context.Context) (uid, gid int, err error) {
	return lab.ServerCredentials(ctx)
}

// MkdirOwned creates dir (0700) owned by uid:gid.
func MkdirOwned(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// AsUser makes cmd run as uid:gid, from /, with a minimal environment.
func AsUser(cmd *exec.Cmd, uid, gid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin", "LC_ALL=C", "HOME=/nonexistent"}
}

// NodeAddresses gives every node of the lab's spec the address it listens
// on: its site's address, and its own port or the next free one from
// defaultPort in that site.
func NodeAddresses(l *lab.Lab, defaultPort int) (map[string]netip.AddrPort, error) {
	ports := map[string]int{} // site -> next port
	used := map[netip.AddrPort]string{}
	out := map[string]netip.AddrPort{}
	for _, sn := range l.Spec.Nodes {
		site := l.Site(sn.Site)
		if site == nil {
			return nil, fmt.Errorf("node %s: no site %s", sn.Name, sn.Site)
		}
		port := sn.Port
		if port == 0 {
			if ports[sn.Site] == 0 {
				ports[sn.Site] = defaultPort
			}
			port = ports[sn.Site]
			ports[sn.Site]++
		}
		ap := netip.AddrPortFrom(site.Address, uint16(port))
		if other, dup := used[ap]; dup {
			return nil, fmt.Errorf("nodes %s and %s both listen on %s: give one a different port", other, sn.Name, ap)
		}
		used[ap] = sn.Name
		for ports[sn.Site] != 0 && used[netip.AddrPortFrom(site.Address, uint16(ports[sn.Site]))] != "" {
			ports[sn.Site]++
		}
		out[sn.Name] = ap
	}
	return out, nil
}

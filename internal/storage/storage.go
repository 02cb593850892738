// Package storage makes the volumes nodes keep their files on: a tmpfs
// (memory), a block device served from another site across the lab's
// links (san: nbdkit there; nbdfuse, a loop device and ext4 in the node's
// site), or a file system served from another site (nas: OpenSSH's
// sftp-server there, sshfs in the node's site). It knows no lab: the lab
// says where processes run (Site) and keeps the Record of what was made,
// so that Down can remove it after a crash too. docs/storage.md.
package storage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/spec"
)

// Site is where a process runs: a lab's site (*lab.Site).
type Site interface {
	// Start starts cmd in the site: its network namespace and cgroups.
	Start(cmd *exec.Cmd) error
	// Do runs f on a thread in the site's network namespace.
	Do(f func() error) error
}

// Volume is what to build for one node.
type Volume struct {
	Node    string
	Storage spec.Storage
	// Dir is the volume's own directory: mount points, the served file or
	// directory, logs. It must not exist yet; Down removes it.
	Dir string
	// NodeSite is where the node's server runs: a san's or nas's client
	// side runs there, so its traffic leaves through the site's links.
	NodeSite Site
	// Server is the storage's site and ServerAddr its address; Port is
	// where this volume's server listens there (san, nas).
	Server     Site
	ServerAddr netip.Addr
	Port       int
	// UID and GID own the files the node sees (the servers' OS user).
	UID, GID int
}

// Record is what Up made for one volume, updated (and saved by the
// caller) before each step, so that Down can undo it from the record
// alone after a crash.
type Record struct {
	Node    string `json:"node"`
	Storage string `json:"storage"`
	Kind    string `json:"kind"`
	Dir     string `json:"dir"`
	// Mount is the file system the node's files live on.
	Mount string `json:"mount,omitempty"`
	// Loop is the san's loop device, FuseMount nbdfuse's mount point.
	Loop      string `json:"loop,omitempty"`
	FuseMount string `json:"fuse_mount,omitempty"`
	Procs     []Proc `json:"procs,omitempty"`
}

// Proc is a process a volume runs.
type Proc struct {
	Name  string `json:"name"` // nbdkit, nbdfuse, sftp-server, sshfs
	PID   int    `json:"pid"`
	Start string `json:"start"` // /proc/PID/stat starttime: guards against PID reuse
	// Client is true for the node's side (nbdfuse, sshfs), false for the
	// storage site's server.
	Client bool `json:"client,omitempty"`

	cmd    *exec.Cmd
	exited chan struct{}
}

// Handle holds what runs in this process for a volume: the started
// processes to reap and a nas's listener.
type Handle struct {
	mu     sync.Mutex
	procs  []*Proc
	ln     net.Listener
	closed bool // the listener is closed: no new sftp-server
	wg     sync.WaitGroup
}

// Procs lists the volume's live processes.
func (h *Handle) Procs() []Proc {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Proc
	for _, p := range h.procs {
		select {
		case <-p.exited:
		default:
			out = append(out, Proc{Name: p.Name, PID: p.PID, Start: p.Start, Client: p.Client})
		}
	}
	return out
}

// MountDir is where the node's files go on a volume.
func MountDir(dir string) string { return filepath.Join(dir, "mnt") }

// Up builds v. rec must be empty; save is called after rec changes. On
// error the caller runs Down(rec, h).
func Up(ctx context.Context, v Volume, rec *Record, save func() error) (*Handle, error) {
	*rec = Record{Node: v.Node, Storage: v.Storage.Name, Kind: v.Storage.Kind, Dir: v.Dir}
	if err := save(); err != nil {
		return nil, err
	}
	h := &Handle{}
	if err := os.MkdirAll(MountDir(v.Dir), 0o755); err != nil {
		return h, err
	}
	var err error
	switch v.Storage.Kind {
	case spec.StorageMemory:
		err = upMemory(v, rec, save)
	case spec.StorageSAN:
		err = upSAN(ctx, v, rec, h, save)
	case spec.StorageNAS:
		err = upNAS(ctx, v, rec, h, save)
	default:
		err = fmt.Errorf("storage kind %q has no volume", v.Storage.Kind)
	}
	if err != nil {
		return h, fmt.Errorf("storage %s (%s) for node %s: %w", v.Storage.Name, v.Storage.Kind, v.Node, err)
	}
	return h, nil
}

func upMemory(v Volume, rec *Record, save func() error) error {
	mnt := MountDir(v.Dir)
	rec.Mount = mnt
	if err := save(); err != nil {
		return err
	}
	opts := fmt.Sprintf("size=%d,mode=0755", v.Storage.SizeBytes)
	if err := unix.Mount("replab-"+v.Node, mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", mnt, err)
	}
	return nil
}

// start runs a process of the volume in site, in a session of its own (a
// Ctrl-C at the terminal must not stop storage before the servers on it),
// and records it.
func (h *Handle) start(site Site, name string, client bool, cmd *exec.Cmd, logPath string, rec *Record, save func() error) (*Proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setsid = true
	cmd.SysProcAttr = attr
	if err := site.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid), Client: client, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	rec.Procs = append(rec.Procs, Proc{Name: p.Name, PID: p.PID, Start: p.Start, Client: client})
	return p, save()
}

// wait polls ready until it is true, the process exits (its log says
// why) or the time is up.
func wait(ctx context.Context, p *Proc, logPath string, what string, ready func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for !ready() {
		select {
		case <-p.exited:
			if ready() {
				return nil
			}
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s exited before %s: %s", p.Name, what, lastLines(string(b)))
		case <-ctx.Done():
			return fmt.Errorf("%s: %s: %w", p.Name, what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func lastLines(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(no output)"
	}
	return strings.Join(lines, " / ")
}

func fileExists(p string) func() bool {
	return func() bool { fi, err := os.Stat(p); return err == nil && fi.Size() > 0 }
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// upSAN: a sparse file in the storage site served by nbdkit (with the
// delay filter), attached in the node's site by nbdfuse, a loop device on
// nbdfuse's file, ext4 on the loop device.
func upSAN(ctx context.Context, v Volume, rec *Record, h *Handle, save func() error) error {
	img := filepath.Join(v.Dir, "server.img")
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	err = f.Truncate(v.Storage.SizeBytes)
	f.Close()
	if err != nil {
		return err
	}
	pidfile := filepath.Join(v.Dir, "nbdkit.pid")
	args := []string{"-f", "-P", pidfile, "-i", v.ServerAddr.String(), "-p", strconv.Itoa(v.Port)}
	if d := v.Storage.Delay; d > 0 {
		ms := strconv.FormatInt(d.Milliseconds(), 10) + "ms"
		args = append(args, "--filter=delay")
		args = append(args, "file", "file="+img, "rdelay="+ms, "wdelay="+ms)
	} else {
		args = append(args, "file", "file="+img)
	}
	logPath := filepath.Join(v.Dir, "nbdkit.log")
	p, err := h.start(v.Server, "nbdkit", false, exec.Command("nbdkit", args...), logPath, rec, save)
	if err != nil {
		return err
	}
	if err := wait(ctx, p, logPath, "it listened", fileExists(pidfile)); err != nil {
		return err
	}

	fuseDir := filepath.Join(v.Dir, "nbd")
	if err := os.MkdirAll(fuseDir, 0o755); err != nil {
		return err
	}
	rec.FuseMount = fuseDir
	if err := save(); err != nil {
		return err
	}
	pidfile = filepath.Join(v.Dir, "nbdfuse.pid")
	logPath = filepath.Join(v.Dir, "nbdfuse.log")
	uri := fmt.Sprintf("nbd://%s:%d", v.ServerAddr, v.Port)
	p, err = h.start(v.NodeSite, "nbdfuse", true, exec.Command("nbdfuse", "-P", pidfile, fuseDir+"/disk", uri), logPath, rec, save)
	if err != nil {
		return err
	}
	if err := wait(ctx, p, logPath, "it attached "+uri, fileExists(pidfile)); err != nil {
		return err
	}

	// Direct I/O on the backing file: without it the loop device reads
	// and writes nbdfuse's file through a page cache of its own in the
	// node's site, and reads the file system's cache has dropped come
	// from there instead of across the link.
	dev, err := run(ctx, "losetup", "--find", "--show", "--direct-io=on", filepath.Join(fuseDir, "disk"))
	if err != nil {
		return err
	}
	rec.Loop = dev
	if err := save(); err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "dio")); err != nil || strings.TrimSpace(string(b)) != "1" {
		return fmt.Errorf("loop device %s on nbdfuse's file does not do direct I/O (%s/loop/dio = %q): its reads would not cross the link", dev, filepath.Base(dev), strings.TrimSpace(string(b)))
	}
	// Inode tables and journal are written now, not by a kernel thread
	// across the link while the run measures. 4 KiB blocks whatever the
	// size: mkfs gives a volume under 512 MiB 1 KiB blocks, and every
	// 4 KiB page written would then cross the link as two writes.
	mkfs := []string{"-q", "-F", "-b", "4096", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", "-L", "replab"}
	if !v.Storage.Journal {
		mkfs = append(mkfs, "-O", "^has_journal")
	}
	if _, err := run(ctx, "mkfs.ext4", append(mkfs, dev)...); err != nil {
		return err
	}
	mnt := MountDir(v.Dir)
	rec.Mount = mnt
	if err := save(); err != nil {
		return err
	}
	if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, mnt, err)
	}
	return nil
}

// upNAS: a directory in the storage site served over SFTP (OpenSSH's
// sftp-server, one per connection, run as the servers' OS user by a
// listener in the storage site), mounted by sshfs in the node's site. No
// ssh: sshfs's directport speaks SFTP over plain TCP, as NFS needs no
// encryption either.
func upNAS(ctx context.Context, v Volume, rec *Record, h *Handle, save func() error) error {
	server, err := sftpServer()
	if err != nil {
		return err
	}
	export := filepath.Join(v.Dir, "export")
	if err := os.Mkdir(export, 0o755); err != nil {
		return err
	}
	if err := os.Chown(export, v.UID, v.GID); err != nil {
		return err
	}
	var ln net.Listener
	err = v.Server.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(v.ServerAddr, uint16(v.Port)).String())
		return err
	})
	if err != nil {
		return fmt.Errorf("listen for SFTP: %w", err)
	}
	h.ln = ln
	var n int
	var nmu sync.Mutex
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			nmu.Lock()
			n++
			i := n
			nmu.Unlock()
			h.serveSFTP(v, server, export, c, i, rec, save)
		}
	}()

	mnt := MountDir(v.Dir)
	rec.Mount = mnt
	if err := save(); err != nil {
		return err
	}
	logPath := filepath.Join(v.Dir, "sshfs.log")
	opts := strings.Join([]string{
		"directport=" + strconv.Itoa(v.Port),
		"allow_other", // the servers run as their own OS user
		"idmap=none",  // one machine: uids are the same on both sides
		"noatime",     //
		"max_conns=1", // one SFTP stream, as one NFS mount
		"ServerAliveInterval=0",
		"fsname=replab-" + v.Node,
	}, ",")
	cmd := exec.Command("sshfs", "-f", "-o", opts, v.ServerAddr.String()+":"+export, mnt)
	p, err := h.start(v.NodeSite, "sshfs", true, cmd, logPath, rec, save)
	if err != nil {
		return err
	}
	return wait(ctx, p, logPath, "it mounted "+mnt, func() bool { return mounted(mnt) })
}

// serveSFTP runs sftp-server on one accepted connection, in the storage
// site, as the servers' OS user, starting in the export; its log holds
// what it says on stderr.
func (h *Handle) serveSFTP(v Volume, server, export string, c net.Conn, i int, rec *Record, save func() error) {
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		return
	}
	defer f.Close()
	logPath := filepath.Join(v.Dir, fmt.Sprintf("sftp-server-%d.log", i))
	logf, err := os.Create(logPath)
	if err != nil {
		return
	}
	defer logf.Close()
	cmd := exec.Command(server, "-d", export)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, logf, export
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin", "LC_ALL=C", "HOME=" + export}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(v.UID), Gid: uint32(v.GID)}}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if err := v.Server.Start(cmd); err != nil {
		return
	}
	p := &Proc{Name: "sftp-server", PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid), cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	h.procs = append(h.procs, p)
	rec.Procs = append(rec.Procs, Proc{Name: p.Name, PID: p.PID, Start: p.Start})
	_ = save()
}

// sftpServer finds OpenSSH's sftp-server.
func sftpServer() (string, error) {
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("OpenSSH's sftp-server is missing: scripts/deps.sh demo, or apt-get install openssh-sftp-server sshfs")
}

// procStart returns a process's start time in clock ticks since boot.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// mounted says whether dir is a mount point (in /proc/self/mountinfo).
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescape(f[4]) == dir {
			return true
		}
	}
	return false
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

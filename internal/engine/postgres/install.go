package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pgRoot is where Debian installs PostgreSQL server binaries, one
// directory per major version.
const pgRoot = "/usr/lib/postgresql"

// OSUser runs every PostgreSQL server of every lab: postgres refuses to run
// as root.
const OSUser = "replab"

// install is one PostgreSQL installation.
type install struct {
	BinDir  string
	Version string // e.g. "15.18"
	Major   int
}

func (in *install) bin(name string) string { return filepath.Join(in.BinDir, name) }

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(\.\d+)?`)

// findInstall picks the newest installed major version.
func findInstall(ctx context.Context) (*install, error) {
	dirs, _ := filepath.Glob(filepath.Join(pgRoot, "*", "bin", "postgres"))
	if len(dirs) == 0 {
		return nil, fmt.Errorf("PostgreSQL is not installed (no %s/*/bin/postgres): apt-get install postgresql-15", pgRoot)
	}
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	bin := filepath.Dir(dirs[0])
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("run %s/postgres --version: %w", bin, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return nil, fmt.Errorf("cannot read the PostgreSQL version from %q", strings.TrimSpace(string(out)))
	}
	major, _ := strconv.Atoi(m[1])
	return &install{BinDir: bin, Version: m[1] + m[2], Major: major}, nil
}

func majorOf(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// osUser returns the uid and gid of OSUser, creating the user (a system
// account without login) if it is missing.
func osUser(ctx context.Context) (uid, gid int, err error) {
	u, err := user.Lookup(OSUser)
	if err != nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, cerr := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", "--user-group", OSUser).CombinedOutput()
		if cerr != nil && !strings.Contains(string(out), "already exists") {
			return 0, 0, fmt.Errorf("create OS user %s for the servers: %v: %s", OSUser, cerr, strings.TrimSpace(string(out)))
		}
		if u, err = user.Lookup(OSUser); err != nil {
			return 0, 0, fmt.Errorf("look up OS user %s: %w", OSUser, err)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// mkdirOwned creates dir (0700) owned by uid:gid.
func mkdirOwned(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// hasExtension reports whether the installation ships an extension (e.g.
// pglogical from postgresql-15-pglogical).
func (in *install) hasExtension(name string) bool {
	_, err := os.Stat(filepath.Join("/usr/share/postgresql", strconv.Itoa(in.Major), "extension", name+".control"))
	return err == nil
}

package mariadb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Where Debian's mariadb-server puts the programs replab runs.
const (
	serverBin  = "/usr/sbin/mariadbd"
	installBin = "/usr/bin/mariadb-install-db"
)

// OSUser runs every MariaDB server of every lab, as it runs PostgreSQL's:
// the servers' files and processes belong to one unprivileged user.
const OSUser = "replab"

var versionRE = regexp.MustCompile(`Ver (\d+\.\d+\.\d+)`)

// findVersion checks that the server is installed and returns its
// version, e.g. "10.11.19".
func findVersion(ctx context.Context) (string, error) {
	for _, b := range []string{serverBin, installBin} {
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("MariaDB is not installed (no %s): scripts/deps.sh test, or apt-get install mariadb-server mariadb-client", b)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, serverBin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("run %s --version: %w", serverBin, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("cannot read the MariaDB version from %q", strings.TrimSpace(string(out)))
	}
	return m[1], nil
}

// osUser returns the uid and gid of OSUser, creating the user (a system
// account without login) if it is missing. The PostgreSQL engine does the
// same; whichever runs first creates it.
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

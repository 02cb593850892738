package lab

import (
	"context"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// ServerUser runs every database server of every lab, and owns the
// storage volumes' files: PostgreSQL refuses to run as root, and one
// unprivileged account for every engine keeps data directories and
// sockets alike.
const ServerUser = "replab"

// ServerCredentials returns the uid and gid of ServerUser, creating the
// user (a system account without login) if it is missing.
func ServerCredentials(ctx context.Context) (uid, gid int, err error) {
	u, err := user.Lookup(ServerUser)
	if err != nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, cerr := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", "--user-group", ServerUser).CombinedOutput()
		if cerr != nil && !strings.Contains(string(out), "already exists") {
			return 0, 0, fmt.Errorf("create OS user %s for the servers: %v: %s", ServerUser, cerr, strings.TrimSpace(string(out)))
		}
		if u, err = user.Lookup(ServerUser); err != nil {
			return 0, 0, fmt.Errorf("look up OS user %s: %w", ServerUser, err)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

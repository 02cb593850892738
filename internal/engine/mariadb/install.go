package mariadb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"replab/internal/enginekit"
	"strings"
	"time"
)

// Where Debian's mariadb-server puts the programs replab runs.
const (
	serverBin  = "/usr/sbin/mariadbd"
	installBin = "/usr/bin/mariadb-install-db"
)

// OSUser runs every server of every lab (enginekit.ServerUser).
const OSUser = enginekit.ServerUser

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

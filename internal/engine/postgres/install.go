package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"replab/internal/enginekit"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pgRoot is where Debian installs PostgreSQL server binaries, one
// directory per major version.
const pgRoot = "/usr/lib/postgresql"

// OSUser runs every server of every lab (enginekit.ServerUser).
const OSUser = enginekit.ServerUser

// install is one PostgreSQL installation.
type install struct {
	BinDir  string
	Version string // e.g. "15.18"
	Major   int
	// BackupCompress is what pg_basebackup --compress asks the server for
	// ("" = nothing): see backupCompression.
	BackupCompress string
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
	return &install{BinDir: bin, Version: m[1] + m[2], Major: major, BackupCompress: backupCompression(ctx, bin, major)}, nil
}

// backupCompression picks the server-side compression of base backups:
// a lab's links are slow, so the bytes a copy puts on them are its cost.
// A fresh cluster's 31 MB travel as 3.9 MB with zstd at level 1 and as
// 6.0 MB with LZ4, for about 0.1 s of the server's CPU. Server-side
// compression came with PostgreSQL 15; pg_config says what the build
// supports (server and pg_basebackup come from one build). Unknown means
// uncompressed, which always works.
func backupCompression(ctx context.Context, bin string, major int) string {
	if major < 15 {
		return ""
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_config"), "--configure").Output()
	if err != nil {
		return ""
	}
	switch conf := string(out); {
	case strings.Contains(conf, "'--with-zstd'"):
		return "server-zstd:level=1"
	case strings.Contains(conf, "'--with-lz4'"):
		return "server-lz4"
	}
	return ""
}

func majorOf(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// hasExtension reports whether the installation ships an extension (e.g.
// pglogical from postgresql-15-pglogical).
func (in *install) hasExtension(name string) bool {
	_, err := os.Stat(filepath.Join("/usr/share/postgresql", strconv.Itoa(in.Major), "extension", name+".control"))
	return err == nil
}

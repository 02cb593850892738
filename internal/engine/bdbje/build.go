package bdbje

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"replab/internal/enginekit"
)

// The node program is compiled on first use against JE, which Maven
// fetches from Maven Central; both are cached under CacheDir, the classes
// by their source's hash so that a changed program is built again.

//go:embed java/ReplabNode.java
var nodeSource []byte

// JE's coordinates on Maven Central.
const (
	jeGroup    = "com.sleepycat"
	jeArtifact = "je"
	JEVersion  = "18.3.12"
)

// CacheDir holds the JE jar and the compiled node program; readable by the
// servers' user.
const CacheDir = "/var/cache/replab/bdbje"

// program is the node program, ready to run.
type program struct {
	java    string // the java launcher
	jar     string // JE
	classes string // ReplabNode.class's directory
	version string // JE's
}

func (p *program) classpath() string { return p.jar + ":" + p.classes }

// buildProgram finds java, javac and mvn, fetches JE if it is not cached
// and compiles the node program if its classes are not.
func buildProgram(ctx context.Context, log io.Writer) (*program, error) {
	tools := map[string]string{}
	for _, t := range []string{"java", "javac", "mvn"} {
		p, err := exec.LookPath(t)
		if err != nil {
			return nil, fmt.Errorf("engine bdbje needs a JDK and Maven (%s is missing): scripts/deps.sh test installs them (openjdk-17-jdk-headless, maven)", t)
		}
		tools[t] = p
	}
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Chmod(CacheDir, 0o755)
	jar, err := fetchJE(ctx, tools["mvn"], log)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(nodeSource)
	classes := filepath.Join(CacheDir, "classes-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(classes, "ReplabNode.class")); err != nil {
		if err := compile(ctx, tools["javac"], jar, classes); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "bdbje: node program compiled into %s\n", classes)
	}
	return &program{java: tools["java"], jar: jar, classes: classes, version: JEVersion}, nil
}

// fetchJE returns the cached JE jar, fetching it through Maven first.
func fetchJE(ctx context.Context, mvn string, log io.Writer) (string, error) {
	jar := filepath.Join(CacheDir, fmt.Sprintf("%s-%s.jar", jeArtifact, JEVersion))
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	tmp, err := os.MkdirTemp(CacheDir, "fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(log, "bdbje: fetching %s:%s:%s from Maven Central (once; about 30 s)\n", jeGroup, jeArtifact, JEVersion)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "dependency:copy",
		fmt.Sprintf("-Dartifact=%s:%s:%s", jeGroup, jeArtifact, JEVersion), "-DoutputDirectory="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("fetch JE %s with Maven: %v: %s", JEVersion, err, enginekit.LastLines(out.String(), 8))
	}
	got := filepath.Join(tmp, filepath.Base(jar))
	if err := os.Chmod(got, 0o644); err != nil {
		return "", fmt.Errorf("fetch JE %s: Maven wrote no %s: %s", JEVersion, filepath.Base(jar), enginekit.LastLines(out.String(), 8))
	}
	// Rename is atomic: a concurrent fetch finds the jar whole or not at all.
	if err := os.Rename(got, jar); err != nil {
		return "", err
	}
	return jar, nil
}

// compile builds the node program into classes, atomically.
func compile(ctx context.Context, javac, jar, classes string) error {
	tmp, err := os.MkdirTemp(CacheDir, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "ReplabNode.java")
	if err := os.WriteFile(src, nodeSource, 0o644); err != nil {
		return err
	}
	out := filepath.Join(tmp, "classes")
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, javac, "-nowarn", "-d", out, "-cp", jar, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile the JE node program: %v: %s", err, enginekit.LastLines(string(b), 8))
	}
	if err := filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	}); err != nil {
		return err
	}
	if err := os.Rename(out, classes); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(filepath.Join(classes, "ReplabNode.class")); serr == nil {
			return nil // built meanwhile by another replab
		}
		return err
	}
	return nil
}

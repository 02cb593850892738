package script

import (
	"os"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"testing"
)

// TestParseGolden parses every testdata/parse/*.sql and the built-in
// scripts and compares the parsed form (or the error, file:line:column)
// with the .golden file beside it; go test -update rewrites them.
func TestParseGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/parse/*.sql")
	builtin, _ := filepath.Glob("testdata/builtin/*.sql")
	files = append(files, builtin...)
	if len(files) < 20 {
		t.Fatalf("only %d scripts in testdata", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(f)
			var got string
			sc, err := Parse(name, string(b), "postgres")
			if err == nil {
				err = CheckVariables([]*Script{sc})
			}
			if err != nil {
				got = "error: " + err.Error() + "\n"
			} else {
				got = sc.String()
			}
			testkit.Golden(t, strings.TrimSuffix(f, ".sql")+".golden", []byte(got))
			if strings.HasPrefix(name, "err-") != strings.HasPrefix(got, "error: ") {
				t.Errorf("%s: an err- file must fail and only those: %s", name, got)
			}
		})
	}
}

// TestMySQLPlaceholders: in the mysql dialect variables become ?.
func TestMySQLPlaceholders(t *testing.T) {
	sc, err := Parse("m.sql", "\\set a 1\nUPDATE t SET v = :a WHERE id = :a AND s = 'x\\'y:a';\n", "mysql")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sc.Statements[0].SQL, `UPDATE t SET v = ? WHERE id = ? AND s = 'x\'y:a'`; got != want {
		t.Errorf("sql %q, want %q", got, want)
	}
}

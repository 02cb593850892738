package target

import (
	"strings"
	"testing"

	"replab/internal/spec"
)

func TestHasPassword(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"host=a user=b dbname=c", false},
		{"host=a password=x dbname=c", true},
		{"host=a  password = x", true},
		{"password=x host=a", true},
		{"host=a passwordless=1", false},
		{"postgres://u@h:5432/db", false},
		{"postgres://u:secret@h:5432/db", true},
		{"postgresql://u@h/db?password=secret", true},
		{"postgres://u@h/db?sslmode=disable", false},
	} {
		if got := hasPassword(tc.dsn); got != tc.want {
			t.Errorf("hasPassword(%q) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	text := `[target]
name = "prod"
engine = "postgres"

[target.node.p]
role = "primary"
dsn = "host=10.0.0.5 user=replab password=hunter2"

[target.node.r]
role = "replica"
from = "p"
dsn = "postgres://replab@[::1"
`
	s, err := spec.Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	err = Engine{}.ForSpec(s).Validate(s)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		"t.toml:7: target.node.p.dsn: the connection string carries a password",
		"t.toml:12: target.node.r.dsn: not a PostgreSQL connection string",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error repeats the password:\n%v", err)
	}
}

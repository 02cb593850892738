package target

import (
	"strings"
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/spec"
)

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
	err = Engine{Engines: engine.NewRegistry(postgres.Engine{}).Get}.ForSpec(s).Validate(s)
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

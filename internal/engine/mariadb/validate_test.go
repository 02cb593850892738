package mariadb

import (
	"testing"

	"replab/internal/engine/enginetest"
)

// TestValidationErrors pins every error of the specs in testdata/errors
// (go test -update rewrites the golden files).
func TestValidationErrors(t *testing.T) {
	enginetest.ValidationGolden(t, Engine{}, "testdata/errors")
}

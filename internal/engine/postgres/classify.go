package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"replab/internal/engine"
)

// Classify implements engine.ErrorClassifier: a server error is counted by
// its SQLSTATE; serialization failures (40001) and deadlocks (40P01) lost
// to a concurrent transaction and may be retried. A server starting up or
// shutting down (57P03) or refusing writes (25006: a standby, or recovery)
// is unavailable: the client goes to another node if it has one.
func (c *cluster) Classify(err error) engine.ErrorClass {
	return classify(err)
}

func classify(err error) engine.ErrorClass {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return engine.ErrorClass{}
	}
	switch pe.Code {
	case "40001", "40P01":
		return engine.ErrorClass{Code: pe.Code, Retry: true, Conflict: true}
	case "57P03", "25006":
		return engine.ErrorClass{Code: pe.Code, Unavailable: true}
	}
	return engine.ErrorClass{Code: pe.Code}
}

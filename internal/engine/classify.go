package engine

import (
	"context"
	"errors"
	"net"
)

// Classify classifies err with the cluster's classifier when it has one
// that knows the error, and otherwise by what any client can tell:
// timeouts, cancellation, broken connections, and errors carrying an
// SQLSTATE.
func Classify(c any, err error) ErrorClass {
	if ec, ok := c.(ErrorClassifier); ok {
		if cl := ec.Classify(err); cl.Code != "" && cl.Code != "other" {
			return cl
		}
	}
	return DefaultClass(err)
}

// DefaultClass classifies err without an engine's help.
func DefaultClass(err error) ErrorClass {
	var ne net.Error
	var coded interface{ SQLState() string }
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorClass{Code: "timeout"}
	case errors.Is(err, context.Canceled):
		return ErrorClass{Code: "canceled"}
	case errors.As(err, &ne):
		return ErrorClass{Code: "connection"}
	case errors.As(err, &coded):
		return ErrorClass{Code: coded.SQLState()}
	}
	return ErrorClass{Code: "other"}
}

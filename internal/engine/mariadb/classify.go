package mariadb

import (
	"errors"
	"strconv"

	"github.com/go-sql-driver/mysql"

	"replab/internal/engine"
)

// Classify implements engine.ErrorClassifier: a server error is counted by
// its error number. A deadlock (1213, also how Galera reports a lost
// certification) lost to a concurrent transaction and may be retried; a
// lock wait timeout (1205) may be retried but lost to no one in
// particular; a node that is not ready (1047, Galera's non-primary side)
// is counted under its own number, not retried there, and unavailable: the
// client goes to another member.
func (c *cluster) Classify(err error) engine.ErrorClass {
	return classify(err)
}

func classify(err error) engine.ErrorClass {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		if errors.Is(err, mysql.ErrInvalidConn) {
			return engine.ErrorClass{Code: "connection"}
		}
		return engine.ErrorClass{}
	}
	code := strconv.Itoa(int(me.Number))
	switch me.Number {
	case 1213:
		return engine.ErrorClass{Code: code, Retry: true, Conflict: true}
	case 1205:
		return engine.ErrorClass{Code: code, Retry: true}
	case 1047:
		return engine.ErrorClass{Code: code, Unavailable: true}
	}
	return engine.ErrorClass{Code: code}
}

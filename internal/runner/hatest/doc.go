// Package hatest holds the integration tests of the HA managers
// (Patroni, repmgr, pg_auto_failover) under the runner: each builds a
// three-site lab, kills the primary and waits for the manager's failover,
// a minute or more of mostly waiting. A package of their own so that
// `go test -p` runs them beside the runner's other tests instead of after
// them.
package hatest

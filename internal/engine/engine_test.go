package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"

	"replab/internal/lab"
	"replab/internal/spec"
)

type named string

func (n named) Kind() string                                           { return string(n) }
func (named) Validate(*spec.Spec) error                                { return nil }
func (named) Up(context.Context, *lab.Lab, io.Writer) (Cluster, error) { return nil, nil }

func TestRegistryRefusesADuplicateKind(t *testing.T) {
	r := NewRegistry(named("a"), named("b"))
	if err := r.Register(named("a")); err == nil || !strings.Contains(err.Error(), `"a" registered twice`) {
		t.Errorf("second engine of kind a: %v", err)
	}
	if got := r.Kinds(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("kinds %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewRegistry with a duplicate did not panic")
		}
	}()
	NewRegistry(named("x"), named("x"))
}

func TestTopologyFromNodes(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		nodes                   []Node
		sources, replicas, root []string
	}{
		{"primary and standbys", []Node{
			{Name: "p", Writable: true}, {Name: "e", Upstreams: []string{"p"}}, {Name: "c", Upstreams: []string{"e"}},
		}, []string{"p"}, []string{"e", "c"}, []string{"p"}},
		{"multi-master: every node both", []Node{
			{Name: "m1", Writable: true, Upstreams: []string{"m2"}}, {Name: "m2", Writable: true, Upstreams: []string{"m1"}},
		}, []string{"m1", "m2"}, []string{"m1", "m2"}, []string{"m1"}},
		{"one node", []Node{{Name: "p", Writable: true}}, []string{"p"}, nil, []string{"p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := func(ns []Node) []string {
				var out []string
				for _, n := range ns {
					out = append(out, n.Name)
				}
				return out
			}
			if got := names(Sources(tc.nodes)); !reflect.DeepEqual(got, tc.sources) {
				t.Errorf("sources %v, want %v", got, tc.sources)
			}
			if got := names(Replicas(tc.nodes)); !reflect.DeepEqual(got, tc.replicas) {
				t.Errorf("replicas %v, want %v", got, tc.replicas)
			}
			if got := names(Roots(tc.nodes)); !reflect.DeepEqual(got, tc.root) {
				t.Errorf("roots %v, want %v", got, tc.root)
			}
		})
	}
}

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "server said " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

type classifier map[string]ErrorClass

func (c classifier) Classify(err error) ErrorClass { return c[err.Error()] }

func TestClassify(t *testing.T) {
	own := classifier{"deadlock": {Code: "1213", Retry: true, Conflict: true}}
	for _, tc := range []struct {
		name string
		c    any
		err  error
		want ErrorClass
	}{
		{"the engine's own class", own, errors.New("deadlock"), ErrorClass{Code: "1213", Retry: true, Conflict: true}},
		{"unknown to the engine: default", own, context.DeadlineExceeded, ErrorClass{Code: "timeout"}},
		{"cancelled", nil, fmt.Errorf("query: %w", context.Canceled), ErrorClass{Code: "canceled"}},
		{"broken connection", nil, &net.OpError{Op: "read", Err: errors.New("reset")}, ErrorClass{Code: "connection"}},
		{"an SQLSTATE", nil, fmt.Errorf("x: %w", sqlStateErr("23505")), ErrorClass{Code: "23505"}},
		{"anything else", nil, errors.New("boom"), ErrorClass{Code: "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.c, tc.err); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

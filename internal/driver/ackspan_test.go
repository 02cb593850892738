package driver

import (
	"errors"
	"reflect"
	"testing"
)

// The journal says which node acknowledged each commit, a run at a time:
// a user that moves to another node starts a span, and one that comes
// back starts another.
func TestAckSpansFollowTheNodeThatAcknowledged(t *testing.T) {
	var now int64 = 1000
	u := &user{d: &run{cfg: Config{Now: func() int64 { return now }, ConnNode: func(any) string { return "" }}, start: 1000}}
	ack := func(seq int64, node string, at int64) {
		now = 1000 + at
		u.ackOutcome(seq, true, nil, node)
	}
	ack(1, "p1", 10)
	ack(2, "p1", 20)
	u.ackOutcome(3, true, errors.New("connection lost"), "p1") // unknown: no span
	ack(4, "e1", 50)
	ack(5, "e1", 60)
	ack(6, "", 70) // a node it cannot tell: acknowledged, in no span
	ack(7, "e1", 80)
	ack(8, "p1", 90)
	want := []AckSpan{
		{Node: "p1", From: 0, To: 2, FirstNs: 10, LastNs: 20},
		{Node: "e1", From: 2, To: 4, FirstNs: 50, LastNs: 60},
		{Node: "e1", From: 5, To: 6, FirstNs: 80, LastNs: 80},
		{Node: "p1", From: 6, To: 7, FirstNs: 90, LastNs: 90},
	}
	if !reflect.DeepEqual(u.acks.Spans, want) {
		t.Errorf("spans\n%+v\nwant\n%+v", u.acks.Spans, want)
	}
	if !reflect.DeepEqual(u.acks.AckedNs, []int64{10, 20, 50, 60, 70, 80, 90}) {
		t.Errorf("acked at %v", u.acks.AckedNs)
	}
	if !reflect.DeepEqual(u.acks.Acked, []int64{1, 2, 4, 5, 6, 7, 8}) || !reflect.DeepEqual(u.acks.Unknown, []int64{3}) {
		t.Errorf("acked %v unknown %v", u.acks.Acked, u.acks.Unknown)
	}
}

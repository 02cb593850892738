package enginekit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPollWaitsWhileTheStateMovesAndGivesUpWhenItStalls(t *testing.T) {
	ctx := context.Background()
	n := 0
	state, err := Poll{Interval: time.Millisecond, Stall: time.Minute}.Until(ctx, func(context.Context) (bool, string, error) {
		n++
		return n == 5, fmt.Sprintf("step %d", n), nil
	})
	if err != nil || state != "step 5" {
		t.Errorf("moving state: %q, %v", state, err)
	}
	_, err = Poll{Interval: time.Millisecond, Stall: 20 * time.Millisecond}.Until(ctx, func(context.Context) (bool, string, error) {
		return false, "stuck at 3", nil
	})
	if err == nil || !strings.Contains(err.Error(), "no progress within 20ms (stuck at 3)") {
		t.Errorf("stalled state: %v", err)
	}
	perm := errors.New("syntax error")
	_, err = Poll{Interval: time.Millisecond, Permanent: func(e error) bool { return e == perm }}.Until(ctx, func(context.Context) (bool, string, error) {
		return false, "", perm
	})
	if err != perm {
		t.Errorf("permanent error: %v", err)
	}
}

func TestEachJoinsEveryError(t *testing.T) {
	err := Each([]int{1, 2, 3}, func(i int) error {
		if i%2 == 1 {
			return fmt.Errorf("item %d failed", i)
		}
		return nil
	})
	if err == nil || err.Error() != "item 1 failed\nitem 3 failed" {
		t.Errorf("got %v", err)
	}
}

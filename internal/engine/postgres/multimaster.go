package postgres

import (
	"context"
	"errors"

	"replab/internal/engine"
)

// upMultimaster is being written: pglogical multi-master.
func (c *cluster) upMultimaster(ctx context.Context) error {
	return errors.New("multi-master: not implemented yet")
}

func (c *cluster) applySchemaMultimaster(ctx context.Context, s engine.Schema) error {
	return errors.New("multi-master: not implemented yet")
}

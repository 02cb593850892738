package postgres

import (
	"context"
	"errors"

	"replab/internal/engine"
)

// upLogical is being written: logical and snapshot replicas.
func (c *cluster) upLogical(ctx, bg context.Context) error {
	return errors.New("logical replication: not implemented yet")
}

func (c *cluster) applySchemaLogical(ctx context.Context, s engine.Schema) error {
	return errors.New("logical replication: not implemented yet")
}

package lease

import (
	"context"
	"errors"
	"testing"
)

// A write under an ownership context fails once the ownership ended, even through contexts
// derived from it; a context under no ownership never fails the check.
func TestErr(t *testing.T) {
	if err := Err(context.Background()); err != nil {
		t.Fatalf("no ownership: %v", err)
	}
	owned, lose := context.WithCancel(context.Background())
	ctx, cancel := context.WithCancel(With(context.Background(), owned))
	defer cancel()
	if err := Err(ctx); err != nil {
		t.Fatalf("owned: %v", err)
	}
	lose()
	if err := Err(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("ownership lost: %v, want context.Canceled", err)
	}
}

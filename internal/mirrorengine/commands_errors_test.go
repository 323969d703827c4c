package mirrorengine

import (
	"errors"
	"testing"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// TestCommandErrorWrapsItsCause: a command's error keeps its cause for errors.Is/As, and
// its message for the API.
func TestCommandErrorWrapsItsCause(t *testing.T) {
	cause := &mirrorerr.SourceChangedError{What: "cluster id", Expected: "a", Actual: "b"}
	err := error(cmdErr(kip.CodeSourceClusterIDMismatch, "mirror %q: %w", "m", cause))
	var changed *mirrorerr.SourceChangedError
	var ce *CommandError
	if !errors.As(err, &changed) || changed != cause || !errors.As(err, &ce) || ce.Message != `mirror "m": `+cause.Error() {
		t.Fatalf("%#v does not wrap its cause with the message", err)
	}
	if plain := cmdErr(kip.CodeInvalidRequest, "no cause %d", 1); plain.Err != nil || plain.Message != "no cause 1" {
		t.Fatalf("%#v", plain)
	}
}

package main

import (
	"os"
	"testing"
)

// TestDocsUpToDate fails when docs/ is not what `go generate ./...` would produce from the
// current schema, templates/ and examples/, or when the examples are not formatted. It
// generates into a temporary directory and never writes the repository. The formatting
// check needs a terraform CLI: in CI a missing one fails the test.
func TestDocsUpToDate(t *testing.T) {
	if _, err := findTerraform(); err != nil && os.Getenv("CI") == "true" {
		t.Fatal(err)
	}
	if err := run(true); err != nil {
		t.Fatal(err)
	}
}

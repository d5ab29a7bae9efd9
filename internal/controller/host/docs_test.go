package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/metalforge/metalforge/internal/test/testenv"
)

// TestStateMachineDocIsCurrent fails when docs/host-state-machine.md no longer matches the table.
func TestStateMachineDocIsCurrent(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "host-state-machine.md"))
	if err != nil {
		t.Fatalf("reading the generated doc (run `make docs`): %v", err)
	}
	if string(got) != StateMachineMarkdown() {
		t.Fatal("docs/host-state-machine.md is stale: run `make docs` and commit it")
	}
}

// Command statemachine-docs writes docs/host-state-machine.md from the host controller's
// transition table (make docs).
package main

import (
	"fmt"
	"os"

	"github.com/metalforge/metalforge/internal/controller/host"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: statemachine-docs <output.md>")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(host.StateMachineMarkdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

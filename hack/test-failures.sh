#!/usr/bin/env bash
# test-failures.sh LOG prints, after a failed `go test`, the failing tests and their assertion
# messages from LOG, so that they are the last lines of the run: CI shows the head and the tail of
# a long output, and the Ironic suites log thousands of lines (agent events, Ironic's warnings)
# between a test's failure message and the end.
set -euo pipefail
log=$1
echo
echo "==== failing tests and their messages (from $log) ===="
# Test-file lines, minus bmcsim's structured log lines (level=…) and the Ironic log dumps that
# follow an env_test/ironic log header; `--- FAIL` lines name the tests; FAIL lines the packages.
grep -E -- '--- FAIL|^FAIL|^panic:|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: ' "$log" |
	grep -v -E 'level=(INFO|DEBUG)|: node [^ ]+: .* after [0-9]' |
	cut -c1-400 | tail -n 60

#!/usr/bin/env bash
# The TAS lab (docs/operations.md, "The TAS lab"): the program lives in test/e2e/lab/ with
# the suites that assert it; this is the README's name for it. Usage: tas-lab.sh without
# arguments.
exec "$(cd "$(dirname "$0")/.." && pwd)/test/e2e/lab/tas-lab.sh" "$@"

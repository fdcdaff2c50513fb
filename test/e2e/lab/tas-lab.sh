#!/usr/bin/env bash
# The TAS lab's command (this package, python3 -m lab): see cli.py or run it without
# arguments for its usage, docs/operations.md ("The TAS lab") for the lab.
# The interpreter is the first python3 with the Kubernetes client and PyYAML
# (python3-kubernetes and python3-yaml, scripts/install-deps.sh): the one on PATH, else
# Debian's, which a version manager's python3 on PATH may hide.
set -euo pipefail
e2e=$(cd "$(dirname "$0")/.." && pwd)
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("kubernetes") and u.find_spec("yaml")))' 2>/dev/null; then
    PYTHONPATH=$e2e${PYTHONPATH:+:$PYTHONPATH} exec "$py" -m lab "$@"
  fi
done
echo "tas-lab: no python3 with the kubernetes and yaml modules (scripts/install-deps.sh installs python3-kubernetes)" >&2
exit 2

#!/usr/bin/env bash
# Runs wire_conformance.py with Debian's python3 (which has scapy); skips (77)
# when that interpreter is missing.
set -euo pipefail
if [[ ! -x /usr/bin/python3 ]]; then
  echo "SKIP: /usr/bin/python3 not found (apt-get install python3-scapy)"
  exit 77
fi
exec /usr/bin/python3 "$(dirname "$0")/wire_conformance.py" "$@"

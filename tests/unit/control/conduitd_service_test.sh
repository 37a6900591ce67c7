#!/usr/bin/env bash
# Checks config/conduitd.service with `systemd-analyze verify`. systemd-analyze
# exits 0 even for unknown keys or bad values (it only warns), so any line
# that names the unit counts as a failure too.
# Usage: conduitd_service_test.sh UNIT_FILE CONDUITD_BINARY
set -uo pipefail
unit=$1
conduitd=$(realpath "$2")  # meson passes a build-relative path
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd-analyze not installed (package systemd): cannot verify the unit"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# verify checks that ExecStart binaries exist: point them at the build.
sed "s#/usr/local/bin/conduitd#${conduitd}#g" "$unit" > "$work/conduitd.service"
out=$(systemd-analyze verify --man=no "$work/conduitd.service" 2>&1)
rc=$?
echo "$out"
if [[ $rc -ne 0 ]] || grep -q "conduitd.service" <<<"$out"; then
  echo "FAIL: systemd-analyze verify reported problems with the unit"
  exit 1
fi
# The properties the deployment relies on are present.
for key in 'Type=notify' 'WatchdogSec=' 'Restart=on-failure' 'ExecReload=' \
           'RuntimeDirectory=conduit' 'LimitMEMLOCK=infinity' 'CapabilityBoundingSet=' \
           'NoNewPrivileges=yes' 'ProtectSystem=strict'; do
  if ! grep -q "^${key}" "$unit"; then
    echo "FAIL: $unit lacks ${key}"
    exit 1
  fi
done
echo "conduitd.service verified"

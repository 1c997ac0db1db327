#!/usr/bin/env bash
# Install Debian's chromium when no chromium is on PATH (CI: a fresh Debian
# machine, root, apt reachable). The report's browser test (tests/report)
# needs it and fails, not skips, without it. Safe to run more than once.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "ensure-chromium: $(command -v "$name") is installed"
        exit 0
    fi
done
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: no chromium and no apt-get; install chromium by hand" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "ensure-chromium: installing chromium with apt-get"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
command -v chromium

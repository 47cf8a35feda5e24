#!/usr/bin/env bash
# Installs whatever mcpcell needs to build, run and test, from Debian's packages only.
# Idempotent: packages already present are not touched, so a warm machine costs ~1 s.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  nlohmann-json3-dev libcpp-httplib-dev libboost-dev libseccomp-dev libcap-dev
  libspdlog-dev libcli11-dev libtomlplusplus-dev libssl-dev zlib1g-dev
  libarchive-dev  # snapshot export/import (tar.gz)
  prometheus-cpp-dev  # /metrics: its core registry and text serializer (serve/metrics.cc)
  python3-prometheus-client  # the e2e test parses /metrics with its text-format parser
  libarchive-dev  # snapshot export/import (tar.gz); upload_archive in cell init (static)
  libzstd-dev liblzma-dev libbz2-dev nettle-dev  # static archives for the cell init (upload_archive)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-dev llvm  # the fuzz build: libFuzzer and sanitizer runtimes, llvm-symbolizer
  python3 python3-pip python3-venv python3-setuptools python3-wheel
  python3-matplotlib  # the python tool's figures (e2e: tests/e2e/test/python_process.test.mjs)
  bubblewrap iproute2 curl openssl util-linux procps ca-certificates
  # tests/packaging: systemd-analyze verify, a fresh Debian 12 root for the .deb, the
  # Kubernetes manifests' parser, and the container image (packaging_container)
  systemd mmdebstrap python3-yaml podman
  chromium  # tests/browser: the operator page in a real browser (driven by playwright-core)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js is used only by the end-to-end tests (official MCP TypeScript SDK client).
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages and not root; run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

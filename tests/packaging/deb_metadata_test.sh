#!/usr/bin/env bash
# The Debian package's metadata and file list, read with dpkg-deb alone (no network, no
# install; lintian is not used): the control fields a host's apt shows (Package, Version,
# Maintainer as configured, Homepage exactly when configured, Depends), the units
# (service and socket), /usr/share/doc/mcpcell/copyright in the machine-readable format
# 1.0 with a Files: * paragraph whose License has its own paragraph, and
# changelog.Debian.gz naming this version and the maintainer.
# The expected values are the ones configured (build/CPackConfig.cmake).
# Usage: deb_metadata_test.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
config() { sed -n "s/^set($1 \"\(.*\)\")$/\1/p" "$build/CPackConfig.cmake"; }
version=$(config CPACK_PACKAGE_VERSION) maintainer=$(config CPACK_DEBIAN_PACKAGE_MAINTAINER)
homepage=$(config CPACK_DEBIAN_PACKAGE_HOMEPAGE)
[[ -n $version && -n $maintainer ]] || { echo "deb_metadata_test: no version or maintainer in $build/CPackConfig.cmake" >&2; exit 1; }
for tool in cpack dpkg-deb gzip; do
  command -v "$tool" >/dev/null || { echo "deb_metadata_test: $tool missing" >&2; exit 1; }
done
fail() { echo "deb_metadata_test: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mcpcell-debmeta.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$tmp"/pkg/mcpcell_*_amd64.deb)

field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == mcpcell ]] || fail "Package is '$(field Package)'"
[[ $(field Version) == "$version" ]] || fail "Version is '$(field Version)', not $version"
[[ $(field Maintainer) == "$maintainer" ]] || fail "Maintainer is '$(field Maintainer)', not '$maintainer'"
[[ $(field Maintainer) =~ ^[^\<]+\ \<[^@\>]+@[^@\>]+\>$ ]] || fail "Maintainer '$(field Maintainer)' is not 'Name <address>'"
[[ $(field Maintainer) != *@localhost* ]] || fail "Maintainer is a local address"
[[ $(field Homepage) == "$homepage" ]] || fail "Homepage is '$(field Homepage)', configured '$homepage'"
[[ $(field Depends) == *libc6* && $(field Depends) == *ca-certificates* ]] ||
  fail "Depends lacks libc6 or ca-certificates: $(field Depends)"
dpkg-deb -I "$deb" >"$tmp/info.txt"

dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/files.txt"
for f in /usr/bin/mcpcell /usr/bin/mcpcell-init /lib/systemd/system/mcpcell.service \
  /lib/systemd/system/mcpcell.socket /usr/share/doc/mcpcell/copyright \
  /usr/share/doc/mcpcell/changelog.Debian.gz /usr/share/doc/mcpcell/operations.md; do
  grep -qx "$f" "$tmp/files.txt" || fail "the package lacks $f"
done

dpkg-deb -x "$deb" "$tmp/root"
doc=$tmp/root/usr/share/doc/mcpcell
here=$(dirname "$(realpath "$0")")
cmp -s "$tmp/root/lib/systemd/system/mcpcell.socket" "$here/../../packaging/mcpcell.socket" ||
  fail "the shipped mcpcell.socket differs from packaging/mcpcell.socket"
copyright=$doc/copyright
[[ $(head -1 "$copyright") == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ]] ||
  fail "copyright does not open with the format 1.0 line: $(head -1 "$copyright")"
grep -qx "Upstream-Name: mcpcell" "$copyright" || fail "copyright: no Upstream-Name: mcpcell"
# Each line is a field, a continuation (one leading space; "." for an empty line) or the
# empty line between paragraphs (deb822).
bad=$(grep -nvE '^([A-Za-z][A-Za-z-]*: .+| .+|)$' "$copyright" || true)
[[ -z $bad ]] || fail "copyright: lines that are neither fields nor continuations: $bad"
grep -qx "Files: \*" "$copyright" || fail "copyright: no 'Files: *' paragraph"
license=$(awk '/^Files: \*/{f=1} f && /^License: /{print substr($0, 10); exit}' "$copyright")
[[ -n $license ]] || fail "copyright: the Files: * paragraph has no License"
# Every paragraph is separated by one empty line; the License named in Files has its own
# stand-alone paragraph with its text (continuation lines start with a space).
awk -v name="$license" 'BEGIN{RS=""} $0 ~ "^License: " name "\n " {found=1} END{exit !found}' "$copyright" ||
  fail "copyright: no stand-alone 'License: $license' paragraph with its text"
if ! grep -qx "Source: .*" "$copyright" && [[ -n $homepage ]]; then fail "copyright: no Source: $homepage"; fi

gzip -t "$doc/changelog.Debian.gz" || fail "changelog.Debian.gz is not gzip"
first=$(gzip -dc "$doc/changelog.Debian.gz" | head -1)
[[ $first == "mcpcell ($version) "*"; urgency="* ]] || fail "changelog's first line: '$first'"
gzip -dc "$doc/changelog.Debian.gz" | grep -q "^ -- $maintainer  [A-Z][a-z][a-z], [0-9][0-9] " ||
  fail "changelog has no trailer line ' -- $maintainer  <date>'"
echo "deb_metadata_test: $(basename "$deb"): fields, units, copyright (License: $license), changelog ok"

#!/usr/bin/env bash
# `make test`'s acceptance check of the Debian package (Docs/install.md): unpacked into a scratch directory,
# its `geofence` must run --version, import and replay with the Swift toolchain's directory hidden (an empty
# tmpfs over it, in a private mount namespace), name nothing of the toolchain in `ldd`, and agree with the
# build it came from on a recorded drive; its unit must pass `systemd-analyze verify`; its control file must
# carry the C libraries' Depends; lintian must find nothing that debian/geofence.lintian-overrides does not
# explain.
#
#   Scripts/package-check.sh .build/deb/geofence_VERSION_ARCH.deb
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
DEB="${1:?usage: $0 PACKAGE.deb}"
WORK=$(mktemp -d /tmp/geofence-package.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "package-check: $*" >&2; exit 1; }
skip() { echo "package-check: skipped: $*"; }

[ -f "$DEB" ] || fail "$DEB is not there (make deb)"
# The toolchain: the directory holding usr/bin/swift (/opt/swift here).
SWIFT_BIN=$(readlink -f "$(command -v swift)")
TOOLCHAIN=$(dirname "$(dirname "$(dirname "$SWIFT_BIN")")")
[ "$TOOLCHAIN" != / ] || fail "cannot tell the toolchain's directory from $SWIFT_BIN"

dpkg-deb -x "$DEB" "$WORK/root"
BIN="$WORK/root/usr/bin/geofence"
[ -x "$BIN" ] || fail "the package has no /usr/bin/geofence"

# What the binary links: nothing under the toolchain, no Swift runtime library at all.
ldd "$BIN" > "$WORK/ldd" || fail "ldd failed on the packaged binary"
if grep -F "$TOOLCHAIN/" "$WORK/ldd"; then fail "the packaged binary loads the above from the toolchain ($TOOLCHAIN)"; fi
if grep -Ei 'libswift|libFoundation|libdispatch|libBlocksRuntime|not found' "$WORK/ldd"; then
  fail "the packaged binary needs the above"
fi

# Depends: computed from the C libraries it links (dpkg-shlibdeps), the adduser the postinst uses.
DEPENDS=$(dpkg-deb -f "$DEB" Depends)
for lib in libc6 libsqlite3-0 libgps libmosquitto1 libsystemd0 adduser; do
  case "$DEPENDS" in *"$lib"*) ;; *) fail "Depends lacks $lib: $DEPENDS" ;; esac
done
VERSION=$(dpkg-deb -f "$DEB" Version)
dpkg-deb -c "$DEB" > "$WORK/contents"
for path in ./usr/bin/geofence /systemd/system/geofence.service ./etc/default/geofence \
  ./usr/share/doc/geofence/copyright ./usr/share/doc/geofence/install.md; do
  grep -q -- "$path" "$WORK/contents" || fail "the package has no $path"
done
dpkg-deb -I "$DEB" conffiles | grep -qx /etc/default/geofence || fail "/etc/default/geofence is not a conffile"

# A drive and the same region as the example check, for replay; what the build the package came from says.
"$HERE/.build/debug/geofence-sim" demo-drive --json > "$WORK/drive.jsonl"
cp "$HERE/regions.example.json" "$WORK/regions.json"
export GEOFENCE_SOCKET="$WORK/none.sock"
GEOFENCE_STATE_DIR="$WORK/reference" "$HERE/.build/debug/geofence" import "$WORK/regions.json" > /dev/null
GEOFENCE_STATE_DIR="$WORK/reference" "$HERE/.build/debug/geofence" replay "$WORK/drive.jsonl" > "$WORK/reference.jsonl"

# The packaged binary with the toolchain's directory hidden: an empty tmpfs over it, in a private mount
# namespace, so nothing of the toolchain can be found whatever RPATH or cache would point there.
if ! unshare --mount true 2>/dev/null; then
  fail "unshare --mount is not allowed here (needs root or user namespaces): cannot hide $TOOLCHAIN"
fi
cat > "$WORK/hidden.sh" <<EOF
set -eu
mount -t tmpfs -o size=1m none "$TOOLCHAIN"
[ -z "\$(ls -A "$TOOLCHAIN")" ] || { echo "$TOOLCHAIN is not hidden" >&2; exit 1; }
if [ -e "$SWIFT_BIN" ]; then echo "$SWIFT_BIN is still there" >&2; exit 1; fi
export GEOFENCE_STATE_DIR="$WORK/state"
"$BIN" --version > "$WORK/version"
"$BIN" import "$WORK/regions.json" > "$WORK/import.out"
"$BIN" replay "$WORK/drive.jsonl" > "$WORK/packaged.jsonl"
EOF
unshare --mount --propagation private sh "$WORK/hidden.sh" || fail "the packaged binary failed with $TOOLCHAIN hidden"
[ "$(cat "$WORK/version")" = "geofence ${VERSION%%-*}" ] ||
  fail "--version says '$(cat "$WORK/version")', the package is $VERSION"
grep -q "Imported 3 regions" "$WORK/import.out" || fail "import said: $(cat "$WORK/import.out")"
strip() { sed -E 's/"id":"[^"]*",?//' "$1"; }
diff <(strip "$WORK/reference.jsonl") <(strip "$WORK/packaged.jsonl") >&2 ||
  fail "the packaged replay and the build's disagree (above: build <, package >)"
n=$(wc -l < "$WORK/packaged.jsonl")
[ "$n" -ge 2 ] || fail "replay printed only $n events"

# The packaged unit, as systemd would load it (ExecStart= pointed at the unpacked binary).
UNIT=$(find "$WORK/root" -path '*/systemd/system/geofence.service' | head -1)
if command -v systemd-analyze > /dev/null; then
  mkdir "$WORK/unit"
  sed "s|^ExecStart=/usr/bin/geofence|ExecStart=$BIN|" "$UNIT" > "$WORK/unit/geofence.service"
  grep -q '^Type=notify' "$WORK/unit/geofence.service" || fail "the packaged unit is not Type=notify"
  (cd "$WORK/unit" && systemd-analyze verify ./geofence.service) > "$WORK/verify" 2>&1 ||
    { cat "$WORK/verify" >&2; fail "systemd-analyze verify refused the packaged unit"; }
  if [ -s "$WORK/verify" ]; then cat "$WORK/verify" >&2; fail "systemd-analyze verify warned about the packaged unit"; fi
else
  skip "systemd-analyze verify: systemd-analyze is not installed"
fi

# lintian: every tag it still gives is overridden, with its reason, in debian/geofence.lintian-overrides
# (Docs/install.md lists them).
if command -v lintian > /dev/null; then
  # Its tags on stdout; on stderr only remarks (it says running as root is not recommended).
  lintian --display-info --fail-on error,warning,info "$DEB" > "$WORK/lintian" 2> "$WORK/lintian.err" ||
    { cat "$WORK/lintian" "$WORK/lintian.err" >&2; fail "lintian: the tags above are not explained"; }
  [ ! -s "$WORK/lintian" ] || { cat "$WORK/lintian" >&2; fail "lintian printed the above"; }
else
  skip "lintian: not installed"
fi

echo "package-check: $(basename "$DEB"): $n events replayed with $TOOLCHAIN hidden, as the build does; no toolchain library in ldd; unit verified; lintian clean"

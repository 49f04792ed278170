#!/usr/bin/env bash
# `make test`'s check of the library's examples and of Docs/library.md:
# - each ```swift block of Docs/library.md is preceded by `<!-- compiled: PATH -->`, and is then exactly the
#   file PATH (which the build below compiles), or by `<!-- not compiled: WHY -->` (a manifest, a protocol's
#   shape): so the guide's code cannot drift from what compiles;
# - Examples/print-events, built against this package as an application would (with the guide's code in its
#   `library-docs` target), fed the demo's drive as gpsd JSON lines, must print the same events as
#   `geofence replay` on the same fixes (the ids aside: each run makes its own), say each one's typed fields,
#   and end with the vehicle's state in the region (`state(of:subject:)`) and the session `ended`.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$HERE/.build/debug"
WORK=$(mktemp -d /tmp/geofence-example.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The guide's blocks, one file each: BLOCKS/N.swift, and BLOCKS/N.marker the line before it.
DOC="$HERE/Docs/library.md"
mkdir "$WORK/blocks"
awk -v dir="$WORK/blocks" '
  /^```swift$/ { n++; inside = 1; printf "%s\n", previous > (dir "/" n ".marker"); printf "" > (dir "/" n ".swift"); next }
  inside && /^```$/ { inside = 0; next }
  inside { print > (dir "/" n ".swift"); next }
  { previous = $0 }
' "$DOC"
checked=0
for marker in "$WORK"/blocks/*.marker; do
  block="${marker%.marker}.swift"
  line=$(cat "$marker")
  if [[ "$line" =~ ^\<!--\ compiled:\ ([^ ]+)\ --\>$ ]]; then
    file="$HERE/${BASH_REMATCH[1]}"
    [ -f "$file" ] || { echo "example-check: Docs/library.md names $file, which is not there" >&2; exit 1; }
    if ! diff -u "$file" "$block" >&2; then
      echo "example-check: a block of Docs/library.md differs from ${BASH_REMATCH[1]} (above: file -, doc +)" >&2
      exit 1
    fi
    checked=$((checked + 1))
  elif [[ ! "$line" =~ ^\<!--\ not\ compiled:\ .+\ --\>$ ]]; then
    echo "example-check: a swift block of Docs/library.md has no <!-- compiled: PATH --> line before it:" >&2
    head -3 "$block" >&2
    exit 1
  fi
done
[ "$checked" -ge 4 ] || { echo "example-check: only $checked compiled blocks in Docs/library.md" >&2; exit 1; }

# SwiftPM does not see files added to or moved within the package the example depends on (this one) in an
# existing scratch directory, and then fails to compile or links stale objects: start it afresh whenever the
# list of source files changed.
SOURCES_LIST=$(cd "$HERE" && find Sources -name '*.swift' | sort | sha256sum | cut -d' ' -f1)
if [ "$(cat "$HERE/.build/examples/.sources" 2>/dev/null)" != "$SOURCES_LIST" ]; then
  rm -rf "$HERE/.build/examples"
fi
swift build --package-path "$HERE/Examples/print-events" --scratch-path "$HERE/.build/examples" -q
echo "$SOURCES_LIST" > "$HERE/.build/examples/.sources"
"$BIN/geofence-sim" demo-drive --json > "$WORK/drive.jsonl"

"$HERE/.build/examples/debug/print-events" "$WORK/drive.jsonl" > "$WORK/embedded.jsonl" 2> "$WORK/embedded.log"

export GEOFENCE_STATE_DIR="$WORK/state" GEOFENCE_SOCKET="$WORK/none.sock"
"$BIN/geofence" add --id customer-42 --name "Customer 42, loading bay" --lat 51.5007 --lon -0.12027 --radius 50 \
  --notify enter,exit > /dev/null
"$BIN/geofence" replay "$WORK/drive.jsonl" > "$WORK/replayed.jsonl"

strip() { sed -E 's/"id":"[^"]*",?//' "$1"; }
if ! diff <(strip "$WORK/replayed.jsonl") <(strip "$WORK/embedded.jsonl"); then
  echo "example-check: the embedded monitor and geofence replay disagree (above: replay <, embedded >)" >&2
  exit 1
fi
n=$(wc -l < "$WORK/embedded.jsonl")
[ "$n" -ge 2 ] || { echo "example-check: only $n events: the drive should enter and leave the bay" >&2; exit 1; }
# The typed fields say what the JSON says: the type, the region, the subject and the state, event by event.
sed -E 's/.*"type":"([^"]*)","region":"([^"]*)","subject":"([^"]*)".*"state":"([^"]*)".*/\1 \2 by \3: \4,/' \
  "$WORK/embedded.jsonl" > "$WORK/from-json.txt"
grep -v ' is .* in customer-42; the session has ' "$WORK/embedded.log" | sed -E 's/^print-events: //; s/ [^ ]* m from the centre$//' \
  > "$WORK/typed.txt"
if ! diff "$WORK/from-json.txt" "$WORK/typed.txt"; then
  echo "example-check: the typed events disagree with their JSON (above: JSON <, typed >)" >&2
  exit 1
fi
last=$(tail -1 "$WORK/embedded.log")
expected="print-events: /dev/demo is outside in customer-42; the session has ended"
[ "$last" = "$expected" ] || { echo "example-check: wanted \"$expected\", got \"$last\"" >&2; exit 1; }
echo "example-check: Examples/print-events printed the $n events geofence replay prints, typed, and the state after;" \
  "$checked blocks of Docs/library.md are the compiled files"

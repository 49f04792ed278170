#!/usr/bin/env bash
# Builds and runs the libFuzzer harnesses in Fuzz/ (Docs/reliability.md, "Fuzzing").
#
#   Scripts/fuzz.sh build [HARNESS...]   compile into .build/fuzz/bin (only what changed)
#   Scripts/fuzz.sh run   [HARNESS...]   build, then fuzz each for FUZZ_SECONDS (default 600)
#   Scripts/fuzz.sh smoke [HARNESS...]   build, then fuzz each for FUZZ_SECONDS (default 10)
#   Scripts/fuzz.sh list                 the harnesses and whether they can be built
#
# A harness is one file, Fuzz/<Name>Fuzzer.swift, defining LLVMFuzzerTestOneInput. Comment lines at
# its top say how to build and seed it:
#   // fuzz-max-len: 1048576            largest input libFuzzer tries
#   // fuzz-seeds: gpsd regions json    generated seed sets (see make_seeds) besides Fuzz/Seeds/<Name>/
#   // fuzz-sources: path.swift ...     files compiled into the harness's own module (skipped if absent)
# Every harness links GeofenceCore's sources (FUZZ_CORE_DIRS: all its folders), compiled once with
# coverage and AddressSanitizer.
#
# Environment:
#   FUZZ_SECONDS   seconds per harness (600 for run, 10 for smoke)
#   FUZZ_PARALLEL  harnesses fuzzed at once (default 1; each uses one core)
#   FUZZ_FIXTURES  where the gpsd fixtures are (default ../shared/fixtures, beside the repository)
#   FUZZ_NICE      niceness of the fuzzers (default 10)
#   SWIFTC         the compiler (default swiftc)
#
# Output under .build/fuzz/: corpus/<Name> (grows across runs), artifacts/<Name> (crash-*, timeout-*,
# oom-*, leak-* inputs), logs/<Name>.log, summary.md. Exit status 1 if any harness found a problem.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="$ROOT/.build/fuzz"
SWIFTC="${SWIFTC:-swiftc}"
# Every folder of GeofenceCore: Model reaches Geodesy (polygons), JSON the event types of Monitor, and the
# MQTT payload harness the fix classification and filter.
FUZZ_CORE_DIRS="${FUZZ_CORE_DIRS:-Access Collections Filter Geodesy Index JSON Model Monitor Source Values}"
FUZZ_FIXTURES="${FUZZ_FIXTURES:-$ROOT/../shared/fixtures}"
FUZZ_PARALLEL="${FUZZ_PARALLEL:-1}"
FUZZ_NICE="${FUZZ_NICE:-10}"
FLAGS=(-O -g -sanitize=fuzzer,address -swift-version 6 -parse-as-library -use-ld=lld -package-name geofence)

die() { echo "fuzz: $*" >&2; exit 2; }

# libFuzzer comes with the Swift toolchain (lib/swift/clang/lib/linux/libclang_rt.fuzzer-*.a): swiftc
# links its own copy and never Debian's libclang-rt-*-dev, so there is nothing to install.
check_toolchain() {
  command -v "$SWIFTC" >/dev/null || die "$SWIFTC not found"
  local bin runtime
  bin="$(dirname "$(readlink -f "$(command -v "$SWIFTC")")")"
  runtime="$bin/../lib/swift/clang/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
  [ -f "$runtime" ] || die "this Swift toolchain has no libFuzzer runtime ($runtime); use a swift.org toolchain"
  [ -x "$bin/llvm-symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$bin/llvm-symbolizer"
  return 0
}

# The value of a `// fuzz-KEY:` line at the top of a harness.
directive() { sed -n "s|^// fuzz-$2: *||p" "$1" | head -1; }

all_harnesses() { for f in Fuzz/*Fuzzer.swift; do basename "$f" .swift; done; }

# Whether every file a harness needs exists (the control-protocol parser, say, may not yet).
buildable() {
  local src
  for src in $(directive "Fuzz/$1.swift" sources); do [ -f "$src" ] || return 1; done
}

# True if any of the files after the first is newer than the first, or the first is missing.
stale() {
  local target="$1" f
  shift
  [ -e "$target" ] || return 0
  for f in "$@"; do [ "$f" -nt "$target" ] && return 0; done
  return 1
}

build_core() {
  local sources=() dir
  for dir in $FUZZ_CORE_DIRS; do
    while IFS= read -r f; do sources+=("$f"); done < <(find "Sources/GeofenceCore/$dir" -name '*.swift' | sort)
  done
  mkdir -p "$OUT/core"
  if stale "$OUT/core/libGeofenceCore.a" "${sources[@]}" "$0"; then
    echo "fuzz: compiling GeofenceCore ($FUZZ_CORE_DIRS) with coverage and AddressSanitizer"
    nice -n "$FUZZ_NICE" "$SWIFTC" "${FLAGS[@]}" -wmo -module-name GeofenceCore -emit-library -static \
      -emit-module -emit-module-path "$OUT/core/GeofenceCore.swiftmodule" \
      -o "$OUT/core/libGeofenceCore.a" "${sources[@]}" ||
      die "GeofenceCore did not compile from Sources/GeofenceCore/{$FUZZ_CORE_DIRS}; if those files now use" \
        "another folder of the module, add it: FUZZ_CORE_DIRS='$FUZZ_CORE_DIRS Other'"
  fi
}

build_harness() {
  local name="$1" extra
  read -r -a extra <<<"$(directive "Fuzz/$name.swift" sources)"
  local inputs=(Fuzz/Support/*.swift "Fuzz/$name.swift" "${extra[@]}")
  mkdir -p "$OUT/bin"
  if stale "$OUT/bin/$name" "${inputs[@]}" "$OUT/core/libGeofenceCore.a"; then
    echo "fuzz: compiling $name"
    nice -n "$FUZZ_NICE" "$SWIFTC" "${FLAGS[@]}" -module-name "$name" -I "$OUT/core" -L "$OUT/core" \
      -lGeofenceCore "${inputs[@]}" -o "$OUT/bin/$name"
  fi
}

# Seeds are made afresh on every run from the committed hand-written ones and the fixtures, so
# nothing derived from ../shared is ever committed.
make_seeds() {
  local name="$1" dir="$OUT/seeds/$1" kind
  rm -rf "$dir"
  mkdir -p "$dir"
  [ -d "Fuzz/Seeds/$name" ] && cp Fuzz/Seeds/"$name"/* "$dir"/ 2>/dev/null || true
  for kind in $(directive "Fuzz/$name.swift" seeds); do
    case "$kind" in
      gpsd | json)
        # Every distinct JSON line of gpsd's regression logs, one file each, without the newline.
        local chk=("$FUZZ_FIXTURES"/gpsd/*.chk)
        if [ -e "${chk[0]}" ]; then
          awk -v dir="$dir" '/^\{/ && !seen[$0]++ { f = dir "/gpsd-" ++n; printf "%s", $0 > f; close(f) }' "${chk[@]}"
        else
          echo "fuzz: no gpsd fixtures in $FUZZ_FIXTURES/gpsd; seeding $name without them" >&2
        fi
        ;;&
      regions | json)
        cp regions.example.json "$dir/regions.example.json"
        cp Demo/regions.json "$dir/demo-regions.json"
        ;;
    esac
  done
}

# One harness for $SECONDS; prints nothing, leaves its log and a summary row in $OUT/rows/.
run_harness() {
  local name="$1" seconds="$2" maxlen start end status=0
  maxlen="$(directive "Fuzz/$name.swift" max-len)"
  mkdir -p "$OUT/corpus/$name" "$OUT/artifacts/$name" "$OUT/logs" "$OUT/rows" "$OUT/work/$name"
  local before
  before="$(find "$OUT/artifacts/$name" -type f | wc -l)"
  start="$(date +%s)"
  (
    cd "$OUT/work/$name"
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" nice -n "$FUZZ_NICE" \
      "$OUT/bin/$name" -max_total_time="$seconds" -max_len="${maxlen:-65536}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$name/" \
      "$OUT/corpus/$name" "$OUT/seeds/$name"
  ) >"$OUT/logs/$name.log" 2>&1 || status=$?
  end="$(date +%s)"
  local execs cov ft found files bytes
  # The last status line (`#N ... cov: C ft: F corp: ...`) has the final coverage; a run that
  # crashed while loading its corpus has none.
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/logs/$name.log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$OUT/logs/$name.log" | tail -1 | cut -d' ' -f2 || true)"
  ft="$(grep -o 'ft: [0-9]*' "$OUT/logs/$name.log" | tail -1 | cut -d' ' -f2 || true)"
  found=$(($(find "$OUT/artifacts/$name" -type f | wc -l) - before))
  files="$(find "$OUT/corpus/$name" -type f | wc -l)"
  bytes="$(find "$OUT/corpus/$name" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", s / 1024 }')"
  local verdict="ok"
  [ "$status" -ne 0 ] || [ "$found" -gt 0 ] && verdict="FAILED (exit $status, see logs/$name.log)"
  printf '| %s | %s | %s | %s | %s | %s files, %s KiB | %s s | %s | %s |\n' "$name" "${execs:-?}" \
    "$( [ -n "$execs" ] && echo $((execs / (end - start > 0 ? end - start : 1))) || echo '?')" \
    "${cov:-?}" "${ft:-?}" "$files" "$bytes" "$((end - start))" "$found" "$verdict" >"$OUT/rows/$name"
}

main() {
  local command="${1:-run}"
  shift || true
  local names=("$@")
  [ ${#names[@]} -gt 0 ] || mapfile -t names < <(all_harnesses)
  local name
  for name in "${names[@]}"; do [ -f "Fuzz/$name.swift" ] || die "no harness Fuzz/$name.swift"; done

  if [ "$command" = list ]; then
    for name in "${names[@]}"; do
      if buildable "$name"; then echo "$name"; else echo "$name (skipped: missing $(directive "Fuzz/$name.swift" sources))"; fi
    done
    return 0
  fi
  case "$command" in
    build) ;;
    run) FUZZ_SECONDS="${FUZZ_SECONDS:-600}" ;;
    smoke) FUZZ_SECONDS="${FUZZ_SECONDS:-10}" ;;
    *) die "unknown command '$command' (build, run, smoke or list)" ;;
  esac

  check_toolchain
  build_core
  local ready=()
  for name in "${names[@]}"; do
    if buildable "$name"; then
      build_harness "$name"
      ready+=("$name")
    else
      echo "fuzz: skipping $name: missing $(directive "Fuzz/$name.swift" sources)"
    fi
  done
  [ "$command" = build ] && return 0

  rm -rf "$OUT/rows"
  echo "fuzz: ${#ready[@]} harnesses, ${FUZZ_SECONDS} s each, ${FUZZ_PARALLEL} at a time; logs in .build/fuzz/logs"
  local running=0
  for name in "${ready[@]}"; do
    make_seeds "$name"
    echo "fuzz: $name ($(find "$OUT/seeds/$name" -type f | wc -l) seeds, $(find "$OUT/corpus/$name" -type f 2>/dev/null | wc -l) in corpus)"
    run_harness "$name" "$FUZZ_SECONDS" &
    running=$((running + 1))
    if [ "$running" -ge "$FUZZ_PARALLEL" ]; then
      wait -n || true
      running=$((running - 1))
    fi
  done
  wait || true

  {
    echo "| Harness | Executions | Exec/s | cov | ft | Corpus | Time | Crashes | Result |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
    for name in "${ready[@]}"; do
      cat "$OUT/rows/$name" 2>/dev/null || echo "| $name | | | | | | | | FAILED (no result, see logs/$name.log) |"
    done
  } >"$OUT/summary.md"
  echo
  cat "$OUT/summary.md"
  if grep -q FAILED "$OUT/summary.md"; then
    echo
    echo "fuzz: problems found; inputs in .build/fuzz/artifacts/<harness>/, reproduce with .build/fuzz/bin/<harness> <file>"
    return 1
  fi
}

main "$@"

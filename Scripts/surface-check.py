#!/usr/bin/env python3
"""`make test`'s check of the library's public surface (issue 25: "a surface the compiler holds").

public is what Sources/Geofence/Geofence.swift re-exports, and it is documented:
- every `public` declaration in the engine's modules belongs to a type the façade names (or to one of
  SUPPORTING, the types those name in their public signatures); everything the modules share among
  themselves is `package`;
- every public declaration has a `///` comment, protocol witnesses aside (`==`, `description`, ...).
Exit 1 with one line per finding.
"""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = ["GeofenceCore", "GeofenceStore", "GeofenceEngine", "GeofenceGPSD", "GeofenceCLI", "GeofenceSystem",
           "GeofenceTestSupport"]
# Types outside the façade's list that its types' public signatures use, so public too.
SUPPORTING = {"RegionLimits", "StateEvent", "MQTTAddressError", "MQTTAcknowledgement", "FixUsability"}
WITNESSES = re.compile(r"\b(func (==|<|hash\b)|var (description|debugDescription|hashValue)\b|init\(from |func encode\(to )")
DECLARATION = re.compile(
    r"^(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate|final|indirect|nonisolated)\s+)*"
    r"(struct|class|enum|protocol|actor|extension|typealias|func|let|var|init)\b\s*([A-Za-z_]\w*)?")

facade = (ROOT / "Sources/Geofence/Geofence.swift").read_text()
exported = {m.group(1) for m in re.finditer(r"public typealias \w+ = \w+\.([A-Za-z_]\w*)", facade)} | SUPPORTING
findings = []
for module in MODULES:
    for path in sorted((ROOT / "Sources" / module).rglob("*.swift")):
        lines = path.read_text().split("\n")
        top = None
        for i, line in enumerate(lines):
            if line and not line[0].isspace() and not line.startswith(("//", "}")):
                m = DECLARATION.match(line)
                if m:
                    top = m.group(2) if m.group(1) not in ("func", "let", "var", "init") else None
            code = line.split("//")[0]
            if not re.search(r"\bpublic\b", code):
                continue
            where = f"{path.relative_to(ROOT)}:{i + 1}"
            if module in ("GeofenceCLI", "GeofenceSystem", "GeofenceTestSupport") or top not in exported:
                findings.append(f"{where}: public, but the façade (Sources/Geofence/Geofence.swift) does not export "
                                f"{top or 'a global'}: make it package: {line.strip()}")
                continue
            # Above the declaration: its attributes (an `@available(...)` may span lines), then the comment.
            j = i - 1
            while j >= 0 and not lines[j].strip().startswith("///") and (
                lines[j].strip().startswith(("@", "*", "message:", '"', ")"))
            ):
                j -= 1
            if not lines[j].strip().startswith("///") and not WITNESSES.search(code):
                findings.append(f"{where}: public and undocumented: {line.strip()}")
for f in findings:
    print(f"surface-check: {f}", file=sys.stderr)
if findings:
    sys.exit(1)
count = sum(1 for m in MODULES for p in (ROOT / "Sources" / m).rglob("*.swift")
            for l in p.read_text().split("\n") if re.search(r"\bpublic\b", l.split("//")[0]))
print(f"surface-check: {count} public declarations, all in the façade's {len(exported)} types, all documented")

import Foundation
import GeofenceCore
import GeofenceSystem

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Monotonic nanoseconds, for timing whole phases (imports, start-up, replays).
func nanoseconds() -> UInt64 { MonotonicClock.nanoseconds() }

/// Nanoseconds of CPU time this thread has used: for per-operation timings on a shared machine, where
/// wall time would also count the time other processes held the CPU.
func threadNanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// Seconds taken by `body`.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = nanoseconds()
    try body()
    return Double(nanoseconds() - start) / 1e9
}

func median(_ values: [Double]) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/// Runs `round` `rounds` times after `warmUp` untimed ones; each returns how many operations it did.
/// Returns the median nanoseconds per operation over the timed rounds.
func medianNanosecondsPerOperation(rounds: Int, warmUp: Int = 1, _ round: () -> Int) -> Double {
    for _ in 0..<warmUp { _ = round() }
    var perOperation: [Double] = []
    for _ in 0..<rounds {
        let start = threadNanoseconds()
        let operations = round()
        perOperation.append(Double(threadNanoseconds() - start) / Double(max(1, operations)))
    }
    return median(perOperation)
}

/// Resident memory of the process (`/proc/self/statm`), in bytes.
///
/// Large arrays are mapped on their own by malloc and unmapped when freed, so the difference around
/// building a structure is what it holds; pages reserved but never written (an array's spare capacity)
/// are not counted, as the kernel never backs them.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// The first three fields of `/proc/loadavg`.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
    return text.split(separator: " ").prefix(3).joined(separator: ", ")
}

/// Keeps a value alive and opaque to the optimizer, so a benchmark's work is not thrown away.
@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

// MARK: Synthetic data

/// The benchmark's country: 1000 km × 1000 km around 46°N 2°E (about metropolitan France).
enum Country {
    static let center = Coordinate(latitude: 46, longitude: 2)
    static let latitudeSpan = 1_000_000 / 111_200.0
    static let longitudeSpan = 1_000_000 / (111_320.0 * cos(46 * Double.pi / 180))

    static func randomPoint(using rng: inout some RandomNumberGenerator) -> Coordinate {
        Coordinate(
            latitude: center.latitude + Double.random(in: -0.5...0.5, using: &rng) * latitudeSpan,
            longitude: center.longitude + Double.random(in: -0.5...0.5, using: &rng) * longitudeSpan)
    }

    /// A radius between 50 m and 2 km, spread evenly on a log scale (as many 50–200 m depots and
    /// customer sites as 500 m–2 km zones).
    static func randomRadius(using rng: inout some RandomNumberGenerator) -> Double {
        (50 * pow(40, Double.random(in: 0...1, using: &rng))).rounded()
    }

    /// `count` regions with ids `r0000001`… and the defaults a user gets from `geofence add`.
    static func regions(_ count: Int, seed: UInt64) -> [Region] {
        var rng = BenchRandom(seed: seed)
        let createdAt = Date(timeIntervalSince1970: 1_790_000_000)
        return (0..<count).map { i in
            try! Region(
                id: "r\(String(i + 1).leftPadded(to: 7))", center: randomPoint(using: &rng),
                radius: randomRadius(using: &rng), createdBy: 1000, createdAt: createdAt)
        }
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

/// SplitMix64: small, fast and seedable, so every run draws the same data.
struct BenchRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: The report

/// The table the benchmark prints: one row per measurement, in the order measured.
final class Report {
    struct Row {
        var section: String
        var measure: String
        var value: String
        var note: String
    }

    private(set) var rows: [Row] = []

    /// Records a row and shows it at once on standard error, so a long run shows progress.
    func add(_ section: String, _ measure: String, _ value: String, _ note: String = "") {
        rows.append(Row(section: section, measure: measure, value: value, note: note))
        var line = "  \(measure): \(value)"
        if !note.isEmpty { line += "  (\(note))" }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// The table in Markdown.
    func markdown() -> String {
        var out = "| section | measure | value | note |\n|---|---|---:|---|\n"
        for row in rows {
            out += "| \(row.section) | \(row.measure) | \(row.value) | \(row.note) |\n"
        }
        return out
    }
}

func progress(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// `1234567` as `1 234 567`: long numbers in a table read better grouped.
func grouped(_ value: Double, decimals: Int = 0) -> String {
    let rounded = decimals == 0 ? String(Int(value.rounded())) : String(format: "%.\(decimals)f", value)
    let parts = rounded.split(separator: ".", maxSplits: 1)
    var digits = Array(parts[0])
    let negative = digits.first == "-"
    if negative { digits.removeFirst() }
    var out = ""
    for (i, d) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out += " " }
        out.append(d)
    }
    return (negative ? "-" : "") + out + (parts.count > 1 ? "." + parts[1] : "")
}

/// `n` as "1k", "100k", "1M" for row names.
func sizeName(_ n: Int) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 { return "\(n / 1_000_000)M" }
    if n >= 1000 && n % 1000 == 0 { return "\(n / 1000)k" }
    return String(n)
}

/// A fresh temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init(_ label: String) {
        var template = Array((NSTemporaryDirectory() + "/geofence-bench-\(label)-XXXXXX").utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

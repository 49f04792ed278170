// Embeds geofence: a region, fixes from a file of gpsd JSON lines, and the events as they are committed.
//
//   print-events DRIVE.jsonl [--state-dir DIR]
//
// Prints each region event's JSON, one a line, exactly as `geofence replay` does; with `--state-dir` the
// regions, the monitor's state and the events are kept in SQLite there (else in memory).

import Foundation
import Geofence

var arguments = Array(CommandLine.arguments.dropFirst())
guard let path = arguments.first else {
    FileHandle.standardError.write(Data("usage: print-events DRIVE.jsonl [--state-dir DIR]\n".utf8))
    exit(64)
}
let store: GeofenceMonitor.Store =
    arguments.count == 3 && arguments[1] == "--state-dir" ? .sqlite(directory: arguments[2]) : .inMemory

do {
    // Fixes from a file (a FIFO or "-" for standard input work too); TPVs without a device are "gpsd"'s.
    let source = JSONLineSource(path: path, defaultSubject: "gpsd")
    let monitor = try GeofenceMonitor(source: source, store: store)

    // The demo's loading bay: 50 m around a point on the drive.
    let bay = try Region(
        id: "customer-42", name: "Customer 42, loading bay",
        center: Coordinate(latitude: 51.5007, longitude: -0.12027), radius: 50, notify: [.enter, .exit])
    if try await !monitor.regions().contains(where: { $0.id == bay.id }) { try await monitor.add(bay) }

    // Each event is yielded once it is committed; the sequence ends at the end of the file.
    for try await event in monitor.events() where event.isRegionEvent {
        print(event.json)
    }

    let status = try await monitor.status()
    FileHandle.standardError.write(
        Data("print-events: \(status.source): \(status.sourceStatus?.usableFixes ?? 0) usable fixes\n".utf8))
} catch {
    FileHandle.standardError.write(Data("print-events: \(error)\n".utf8))
    exit(1)
}

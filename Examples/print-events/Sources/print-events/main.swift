// Embeds geofence: a region, fixes from a file of gpsd JSON lines, and the events as they are committed.
//
//   print-events DRIVE.jsonl [--state-dir DIR]
//
// Prints each region event's JSON on standard output, one a line, exactly as `geofence replay` does, and on
// standard error what the typed event says and, at the end, the vehicle's state in the region; with
// `--state-dir` the regions, the monitor's state and the events are kept in SQLite there (else in memory).

import Foundation
import Geofence

func say(_ line: String) { FileHandle.standardError.write(Data("print-events: \(line)\n".utf8)) }

let arguments = Array(CommandLine.arguments.dropFirst())
guard let path = arguments.first else {
    say("usage: print-events DRIVE.jsonl [--state-dir DIR]")
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
    var vehicle = "gpsd"
    for try await event in monitor.events() {
        guard let type = event.type else { continue }  // a state event (the source, a device, ...)
        print(event.json)
        vehicle = event.subject ?? vehicle
        switch type {
        case .enter, .exit, .determined:
            let distance = event.distance.map { "\($0) m from the centre" } ?? "no distance"
            say("\(type) \(event.region ?? "") by \(event.subject ?? ""): \(event.state?.rawValue ?? ""), \(distance)")
        case .dwell, .expired:
            say("\(type) \(event.region ?? "")")
        }
    }

    // The state now, as of the last commit (Core Location's CLMonitor record(for:)).
    let state = try await monitor.state(of: bay.id, subject: vehicle)
    let status = try await monitor.status()
    say("\(vehicle) is \(state?.rawValue ?? "not monitored") in \(bay.id); the session has \(status.liveness)")
} catch {
    say("\(error)")
    exit(1)
}

// Embeds `GeofenceMonitor` with the SQLite store and a JSON-lines source, as an application would, and prints
// each event's id and type as it is yielded. The library's crash tests run it, kill it with SIGKILL, and start
// it again with `--after ID`.
//
//   geofence-embed-probe --state-dir DIR --source FILE [--after ID] [--region ID,LAT,LON,RADIUS]

import Foundation
import Geofence

var arguments = CommandLine.arguments.dropFirst()
var options: [String: String] = [:]
while let name = arguments.popFirst() {
    guard name.hasPrefix("--"), let value = arguments.popFirst() else {
        FileHandle.standardError.write(Data("usage: --state-dir DIR --source FILE [--after ID] [--region ...]\n".utf8))
        exit(64)
    }
    options[String(name.dropFirst(2))] = value
}
guard let directory = options["state-dir"], let path = options["source"] else {
    FileHandle.standardError.write(Data("--state-dir and --source are required\n".utf8))
    exit(64)
}
/// One line on standard output, unbuffered: what a SIGKILL cuts off is what was not yet printed.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
do {
    let monitor = try GeofenceMonitor(source: JSONLineSource(path: path), store: .sqlite(directory: directory))
    if let spec = options["region"] {
        let parts = spec.split(separator: ",").map(String.init)
        guard parts.count == 4, let lat = Double(parts[1]), let lon = Double(parts[2]), let radius = Double(parts[3])
        else {
            FileHandle.standardError.write(Data("--region wants ID,LAT,LON,RADIUS\n".utf8))
            exit(64)
        }
        if try await !monitor.regions().contains(where: { $0.id == parts[0] }) {
            try await monitor.add(
                Region(id: parts[0], center: Coordinate(latitude: lat, longitude: lon), radius: radius))
        }
    }
    say("ready")
    for try await event in monitor.events(after: options["after"]) {
        say("\(event.id) \(event.type?.rawValue ?? event.stateType?.rawValue ?? "")")
    }
    say("end")
} catch {
    FileHandle.standardError.write(Data("geofence-embed-probe: \(error)\n".utf8))
    exit(1)
}

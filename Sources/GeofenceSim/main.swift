// geofence-sim: the demo's receiver. It writes a recorded drive as NMEA, and plays NMEA into a gpsd
// UDP feed in real time, re-stamped with the current time (a recording's own times would be refused
// as stale by a live engine, exactly as a real receiver's old fixes would be).
import Foundation
import GeofenceCore
import GeofenceTestSupport

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("geofence-sim: \(message)\n".utf8))
    exit(64)
}

let usage = """
    usage: geofence-sim demo-drive [--json]             print the demo's recorded drive (NMEA, or gpsd JSON)
           geofence-sim feed --port PORT [--host H] [--speed X] FILE|-
                                                        play NMEA into gpsd's UDP feed, re-stamped to now
           geofence-sim free-ports N                    print N free local ports
    """

/// The demo's drive: out of the depot, a stop at a customer, past a fuel station. 2 epochs a second.
func demoDrive() -> [String] {
    let generator = NMEAGenerator()
    return demoEpochs().flatMap(generator.sentences(for:))
}

/// The same drive as gpsd TPV JSON lines (what `geofence replay` and the JSON source read), eph 5 m.
func demoDriveJSON() -> [String] {
    demoEpochs().map { e in
        let time = TimestampParser.format(e.time)
        return
            #"{"class":"TPV","device":"/dev/demo","mode":3,"time":"\#(time)","lat":\#(e.latitude),"lon":\#(e.longitude),"eph":5,"speed":\#(e.speed),"track":\#(e.course)}"#
    }
}

func demoEpochs() -> [NMEAGenerator.Epoch] {
    let depot = Coordinate(latitude: 51.50070, longitude: -0.12460)
    var epochs: [NMEAGenerator.Epoch] = []
    var time = Date(timeIntervalSince1970: 1_795_003_200)  // 2026-11-18T12:00:00Z
    var here = depot
    func go(east: Double, north: Double, seconds: Double, speed: Double) {
        let steps = Int(seconds * 2)
        let course = atan2(east, north) * 180 / .pi
        for _ in 0..<steps {
            here = offset(here, north: north / Double(steps), east: east / Double(steps))
            epochs.append(
                .init(
                    time: time, latitude: here.latitude, longitude: here.longitude, speed: speed,
                    course: course < 0 ? course + 360 : course, hdop: 0.5))
            time = time.addingTimeInterval(0.5)
        }
    }
    go(east: 0, north: 0, seconds: 2, speed: 0)  // parked in the depot
    go(east: 300, north: 0, seconds: 10, speed: 30)  // out of the depot, east
    go(east: 0, north: 0, seconds: 6, speed: 0)  // a stop at the customer
    go(east: 300, north: 60, seconds: 10, speed: 30)  // on, past the fuel station
    go(east: 200, north: 0, seconds: 4, speed: 50)
    return epochs
}

/// Replaces an NMEA sentence's time (and date) fields with `now`, and fixes its checksum.
func restamp(_ sentence: String, _ now: Date) -> String {
    guard sentence.hasPrefix("$"), let star = sentence.lastIndex(of: "*") else { return sentence }
    var fields = sentence[sentence.index(after: sentence.startIndex)..<star].split(
        separator: ",", omittingEmptySubsequences: false
    ).map(String.init)
    guard let kind = fields.first, kind.count >= 5 else { return sentence }
    let type = kind.suffix(3)
    let clock = NMEAGenerator.timeField(now)
    switch type {
    case "RMC":
        if fields.count > 9 {
            if !fields[1].isEmpty { fields[1] = clock }
            if !fields[9].isEmpty { fields[9] = NMEAGenerator.dateField(now) }
        }
    case "GGA", "GST":
        if fields.count > 1, !fields[1].isEmpty { fields[1] = clock }
    case "GLL":
        if fields.count > 5, !fields[5].isEmpty { fields[5] = clock }
    default:
        break
    }
    return NMEAGenerator.sentence(fields.joined(separator: ","))
}

/// The epoch time a sentence names (RMC/GGA time field), as seconds of day, for pacing.
func secondsOfDay(_ sentence: String) -> Double? {
    let fields = sentence.split(separator: ",", omittingEmptySubsequences: false)
    guard fields.count > 1, fields[0].hasSuffix("RMC") || fields[0].hasSuffix("GGA"), fields[1].count >= 6 else {
        return nil
    }
    let t = fields[1]
    guard let h = Double(t.prefix(2)), let m = Double(t.dropFirst(2).prefix(2)), let s = Double(t.dropFirst(4))
    else { return nil }
    return h * 3600 + m * 60 + s
}

func feed(host: String, port: UInt16, speed: Double, lines: [String]) {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { fail("socket: \(String(cString: strerror(errno)))") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { fail("bad host \(host): use an IPv4 address") }
    let start = Date()
    var firstEpoch: Double?
    var currentEpoch: Double?
    for line in lines where line.hasPrefix("$") {
        if let t = secondsOfDay(line), t != currentEpoch {
            currentEpoch = t
            if firstEpoch == nil { firstEpoch = t }
            var elapsed = t - firstEpoch!
            if elapsed < 0 { elapsed += 86_400 }
            let due = start.addingTimeInterval(elapsed / speed)
            let wait = due.timeIntervalSinceNow
            if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
        }
        let bytes = Array((restamp(line, Date()) + "\r\n").utf8)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // One sentence per datagram; a short gap keeps gpsd's socket buffer from overflowing.
        usleep(2000)
    }
    close(fd)
}

func freePort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 ? getsockname(fd, $0, &length) : -1
        }
    }
    return UInt16(bigEndian: address.sin_port)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail(usage) }
arguments.removeFirst()
switch command {
case "demo-drive":
    for line in arguments.first == "--json" ? demoDriveJSON() : demoDrive() { print(line) }
case "feed":
    var host = "127.0.0.1"
    var port: UInt16?
    var speed = 1.0
    var file: String?
    var i = 0
    while i < arguments.count {
        switch arguments[i] {
        case "--host":
            i += 1
            guard i < arguments.count else { fail("--host needs a value") }
            host = arguments[i]
        case "--port":
            i += 1
            port = i < arguments.count ? UInt16(arguments[i]) : nil
        case "--speed":
            i += 1
            speed = i < arguments.count ? Double(arguments[i]) ?? 0 : 0
        default: file = arguments[i]
        }
        i += 1
    }
    guard let port else { fail("feed needs --port PORT\n" + usage) }
    guard speed > 0 else { fail("--speed must be a number above 0") }
    guard let file else { fail("feed needs a file, or - for standard input") }
    let data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: file)
    guard let data else { fail("cannot read \(file)") }
    let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
    feed(host: host, port: port, speed: speed, lines: lines)
case "free-ports":
    let n = arguments.first.flatMap { Int($0) } ?? 1
    print((0..<n).map { _ in String(freePort()) }.joined(separator: " "))
default:
    fail(usage)
}

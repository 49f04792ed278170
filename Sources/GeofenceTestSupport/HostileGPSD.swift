import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP server that pretends to be gpsd and sends what a broken or malicious one might: random bytes,
/// truncated JSON, megabyte lines, NaN/Infinity/huge numbers, unknown classes, TPVs whose time goes
/// backwards, and incoherent positions. For chaos tests: the engine must survive it, say what it sees,
/// and never turn it into a region event.
package final class HostileGPSD: @unchecked Sendable {
    // @unchecked: `listener` is fixed after init; the flags are atomic.
    package let port: UInt16
    private let listener: Int32
    private let stopping = Atomic(false)
    private let connections = Atomic(0)
    private let sent = Atomic(0)

    /// What the server sends, in turns.
    package enum Kind: CaseIterable, Sendable {
        case randomBytes, truncatedJSON, hugeLine, badNumbers, unknownClass, timeBackwards, incoherentTPV
    }

    /// A peer that sends well-formed TPVs as fast as the socket takes them, instead of garbage.
    package enum Flood: Sendable {
        /// All from one device.
        case oneDevice
        /// Each line from a device never named before.
        case newDevicePerLine
    }

    private let flood: Flood?

    /// Listens on `port` (127.0.0.1; 0 for a free one, then `port` says which); each client gets the
    /// VERSION/DEVICES greeting and then garbage, or with `flood`, a flood of TPVs.
    package init(port: UInt16, seed: UInt64 = 1, flood: Flood? = nil) throws {
        self.flood = flood
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EADDRINUSE)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = UInt16(bigEndian: actual.sin_port)
        listener = fd
        let thread = Thread { self.acceptLoop(seed: seed) }
        thread.start()
    }

    deinit { stop() }

    /// How many clients connected, and how many garbage messages went out.
    package var connectionCount: Int { connections.load(ordering: .relaxed) }
    package var messageCount: Int { sent.load(ordering: .relaxed) }

    package func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop(seed: UInt64) {
        var n: UInt64 = 0
        while !stopping.load(ordering: .acquiring) {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            if client < 0 { continue }
            connections.add(1, ordering: .relaxed)
            n += 1
            let clientSeed = seed &+ n
            Thread.detachNewThread { self.serve(client, seed: clientSeed) }
        }
    }

    private func serve(_ fd: Int32, seed: UInt64) {
        defer { close(fd) }
        var rng = SeededGenerator(seed: seed)
        func send(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
                }
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
        func line(_ text: String) -> Bool { send(Array((text + "\n").utf8)) }
        guard
            line(#"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#),
            line(
                #"{"class":"DEVICES","devices":[{"class":"DEVICE","path":"/dev/hostile","driver":"NMEA0183","activated":"2026-11-30T12:00:00.000Z"}]}"#
            )
        else { return }
        if let flood {
            floodLines(flood, send: send)
            return
        }
        var clock = Date().timeIntervalSince1970
        while !stopping.load(ordering: .relaxed) {
            // A megabyte line makes libgps drop the connection, so it comes rarely: the rest is worth seeing.
            var kind = Kind.allCases.randomElement(using: &rng)!
            if kind == .hugeLine && Int.random(in: 0..<20, using: &rng) != 0 { kind = .badNumbers }
            let ok: Bool
            switch kind {
            case .randomBytes:
                ok = send(
                    (0..<Int.random(in: 1...4000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            case .truncatedJSON:
                ok = line(
                    #"{"class":"TPV","device":"/dev/hostile","mode":3,"time":"2026-11-30T12:00:00.000Z","lat":51.5,"lo"#
                )
            case .hugeLine:
                ok = line(
                    #"{"class":"TPV","device":"/dev/hostile","junk":""# + String(repeating: "x", count: 1 << 20)
                        + #""}"#)
            case .badNumbers:
                ok = line(
                    #"{"class":"TPV","device":"/dev/hostile","mode":3,"time":"2026-11-30T12:00:00.000Z","lat":NaN,"lon":Infinity,"eph":1e999,"speed":-1e308}"#
                )
            case .unknownClass:
                ok = line(#"{"class":"BOGUS","payload":[1,2,{"a":null}]}"#)
            case .timeBackwards, .incoherentTPV:
                // Well-formed TPVs, but each far from the last and (for timeBackwards) earlier than it: no run
                // of them is ever consistent enough to be believed.
                clock += kind == .timeBackwards ? -Double.random(in: 1...3600, using: &rng) : 1
                let lat = Double.random(in: -60...60, using: &rng)
                let lon = Double.random(in: -170...170, using: &rng)
                let time = Date(timeIntervalSince1970: clock)
                ok = line(
                    #"{"class":"TPV","device":"/dev/hostile","mode":3,"time":"\#(HostileGPSD.format(time))","lat":\#(lat),"lon":\#(lon),"eph":5}"#
                )
            }
            if !ok { return }
            sent.add(1, ordering: .relaxed)
            // Reports at uneven times, as the hostile peer's pace: nothing to wait for.
            usleep(UInt32.random(in: 2_000...20_000, using: &rng))
        }
    }

    /// TPVs, 256 to a write, for as long as the client reads them: each a millisecond of fix time after the
    /// last, starting now, at a standstill in Paris.
    private func floodLines(_ flood: Flood, send: ([UInt8]) -> Bool) {
        var milliseconds = Int64(Date().timeIntervalSince1970 * 1000)
        var n = 0
        while !stopping.load(ordering: .relaxed) {
            var chunk: [UInt8] = []
            chunk.reserveCapacity(256 * 160)
            for _ in 0..<256 {
                milliseconds += 1
                n += 1
                let device = flood == .oneDevice ? "/dev/flood" : "/dev/flood\(n)"
                let time = HostileGPSD.format(Date(timeIntervalSince1970: Double(milliseconds / 1000)))
                    .replacingOccurrences(of: ".000Z", with: String(format: ".%03dZ", Int(milliseconds % 1000)))
                let line =
                    #"{"class":"TPV","device":"\#(device)","mode":3,"time":"\#(time)","lat":48.85,"lon":2.35,"eph":5}"#
                    + "\n"
                chunk.append(contentsOf: line.utf8)
            }
            guard send(chunk) else { return }
            sent.add(256, ordering: .relaxed)
        }
    }

    private static func format(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970)
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.000Z", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}

/// How long the soak scenarios run: short inside `make test`, long in `make soak` (GEOFENCE_SOAK=long).
package enum SoakScale {
    package static var isLong: Bool { ProcessInfo.processInfo.environment["GEOFENCE_SOAK"] == "long" }

    /// `short` normally, `long` under `make soak`.
    package static func pick<T>(short: T, long: T) -> T { isLong ? long : short }
}

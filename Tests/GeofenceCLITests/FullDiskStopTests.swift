import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A writer on a FIFO that can tell when the engine has read everything written.
private final class CountingFeed: @unchecked Sendable {
    private let handle: FileHandle

    /// Opens the FIFO once the engine has opened it for reading (within `timeout`), blocking for writes.
    init(fifo: String, timeout: Double = 20) throws {
        var fd: Int32 = -1
        var failure: Int32 = 0
        // ENXIO: no reader yet (the engine is still starting, or did not start); any other error ends the wait.
        _ = Wait.blocking(timeout: timeout, every: .milliseconds(20)) {
            fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            failure = fd >= 0 ? 0 : errno
            return fd >= 0 || failure != ENXIO
        }
        guard fd >= 0 else { throw POSIXError(.ENXIO) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    func send(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        handle.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    /// Bytes written and not yet read by the engine (FIONREAD works on either end of a pipe).
    var unread: Int32 {
        var n: Int32 = 0
        return ioctl(handle.fileDescriptor, UInt(FIONREAD), &n) == 0 ? n : -1
    }

    /// Waits until the engine has read everything written.
    func drained(timeout: Double) async -> Bool {
        await Wait.until(timeout: timeout, every: .milliseconds(20)) { unread == 0 }
    }

    func close() { try? handle.close() }
}

@Suite(
    "a stop on a full disk", .serialized,
    .enabled(if: ScratchMount.canMount, "needs root and mount(2) to make a small filesystem"))
struct FullDiskStopTests {
    static let depot = Coordinate(latitude: 48.85, longitude: 2.35)
    static let start = Date(timeIntervalSince1970: 1_796_000_000)

    /// Ten regions of 100 m, 300 m apart along a road north of the depot.
    static func regions() -> [[String]] {
        (0..<10).map { r in
            let c = offset(depot, north: 150 + Double(r) * 300, east: 0)
            return ["add", "--id", "r\(r)", "--lat", "\(c.latitude)", "--lon", "\(c.longitude)", "--radius", "100"]
        }
    }

    /// Five trucks driving up and down the road at 10 m/s, a fix every 4 s each: 600 fixes a truck, in time order.
    static func drive() -> [(truck: String, time: Date, line: String)] {
        var path: [Double] = []
        for _ in 0..<4 {
            path += (0...75).map { Double($0) * 40 }
            path += (1...74).map { 3000 - Double($0) * 40 }
        }
        var lines: [(String, Date, String)] = []
        for (k, north) in path.prefix(600).enumerated() {
            for v in 0..<5 {
                let t = start.addingTimeInterval(Double(k) * 4 + Double(v) * 0.5)
                let p = offset(depot, north: north, east: Double(v) * 10)
                let truck = "truck-\(v + 1)"
                lines.append(
                    (
                        truck, t,
                        #"{"class":"TPV","device":"\#(truck)","mode":3,"time":"\#(TimestampParser.format(t))","lat":\#(p.latitude),"lon":\#(p.longitude),"eph":5}"#
                    ))
            }
        }
        return lines
    }

    /// Each vehicle's last committed fix time, read as an operator reads it (`geofence vehicles --json`).
    static func committed(state: String, environment: [String: String]) -> [String: Date] {
        guard
            let result = try? GeofenceBinary.run(
                ["vehicles", "--json", "--state-dir", state], environment: environment), result.status == 0,
            let vehicles = try? JSON.parse(result.stdout).arrayValue
        else { return [:] }
        var times: [String: Date] = [:]
        for v in vehicles {
            if let s = v["subject"]?.stringValue, let t = v["lastFixTime"]?.stringValue,
                let time = try? TimestampParser.parse(t)
            {
                times[s] = time
            }
        }
        return times
    }

    @Test(
        "SIGTERM on a full disk exits 74 naming what it did not commit; sent again, every event equals replay's; freed space lets the running engine go on"
    )
    func stopOnFullDisk() async throws {
        try await withCLI { cli in
            let mount = try ScratchMount(at: cli.dir.file("mnt"), size: "4m")
            defer { mount.unmount() }
            let state = mount.path + "/state"
            let env = cli.environment.merging(["GEOFENCE_STATE_DIR": state]) { $1 }
            for add in Self.regions() {
                let added = try GeofenceBinary.run(add + ["--state-dir", state], environment: env)
                #expect(added.status == 0, "\(added.stderr)")
            }
            let drive = Self.drive()
            let fifo = cli.dir.file("fixes.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            func waitCommitted(upTo index: Int, timeout: Double) async -> Bool {
                var expected: [String: Date] = [:]
                for fix in drive[..<index] { expected[fix.truck] = fix.time }
                return await Wait.until(timeout: timeout, every: .milliseconds(100)) {
                    Self.committed(state: state, environment: env) == expected
                }
            }

            var daemon = try DaemonProcess(
                ["run", "--source", "json:" + fifo, "--state-dir", state], logPath: cli.dir.file("run.log"),
                environment: env)
            var feed = try CountingFeed(fifo: fifo)
            defer { feed.close() }

            // A first part on a healthy disk.
            feed.send(drive[0..<600].map(\.line))
            #expect(await waitCommitted(upTo: 600, timeout: 20), "\(daemon.log)")

            // Full: the engine says so and keeps what it judged.
            mount.fill()
            feed.send(drive[600..<1200].map(\.line))
            #expect(await daemon.waitForLog("cannot write to the store", timeout: 15), "\(daemon.log)")

            // Freed: the running engine goes on by itself, and keeps going (its WAL does not take the room back).
            mount.free()
            #expect(await daemon.waitForLog("the store accepts writes again", timeout: 15), "\(daemon.log)")
            feed.send(drive[1200..<1800].map(\.line))
            #expect(await waitCommitted(upTo: 1800, timeout: 20), "recovered without a restart: \(daemon.log)")

            // Full again, and stopped while full: whatever room the engine makes (its reserve, its WAL) is taken
            // at once by filler files that are only ever added, until it has exited; fixes are sent a hundred at a
            // time until the store no longer takes them.
            mount.fill()
            let pid = daemon.pid
            let filling = Task.detached {
                var n = 0
                while kill(pid, 0) == 0 && !Task.isCancelled {
                    ScratchMount.shell("dd if=/dev/zero of=\(mount.path)/filler-\(n) bs=4k 2>/dev/null")
                    n += 1
                    // The pace of the filling, not a wait: the disk fills while the engine runs.
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            var sent = 1800
            var stuck = false
            while sent < drive.count - 100 && !stuck {
                feed.send(drive[sent..<sent + 100].map(\.line))
                sent += 100
                #expect(await feed.drained(timeout: 15))
                stuck = !(await waitCommitted(upTo: sent, timeout: 2))
            }
            #expect(stuck, "the store kept taking fixes on a full disk: \(daemon.log)")
            let stopSeconds = await daemon.stop(timeout: 10)
            filling.cancel()
            #expect(stopSeconds != nil)
            let stopStatus = daemon.process.terminationStatus
            #expect(stopStatus == 74, "\(daemon.log)")
            let log = daemon.log
            let message = log.split(separator: "\n").last { $0.contains("stopped without committing") }.map(String.init)
            #expect(message?.hasPrefix("Error: ") == true, "\(log)")
            #expect(message?.contains("send these vehicles' fixes") == true, "\(message ?? log)")
            // What it names: each vehicle, and the fix time from which to send again.
            var resendFrom: [String: Date] = [:]
            for truck in Set(drive.map(\.truck)) {
                let marker = JSONValue.string(truck).serialized() + " from "
                guard let range = message?.range(of: marker),
                    let end = message?[range.upperBound...].firstIndex(of: " "),
                    let time = try? TimestampParser.parse(String(message![range.upperBound..<end]))
                else { continue }
                resendFrom[truck] = time
            }
            #expect(!resendFrom.isEmpty, "\(message ?? log)")
            // Space again (no engine runs, so the store stays as the stop left it: read with room, a CLI opening
            // it on a full disk may be refused its shared-memory file).
            ScratchMount.shell("rm -f \(mount.path)/filler*")
            // Nothing before the times it names is missing from the store: they follow its last committed fixes.
            let afterStop = Self.committed(state: state, environment: env)
            for (truck, from) in resendFrom {
                let previous = drive.last { $0.truck == truck && $0.time < from }?.time
                #expect(afterStop[truck] == previous, "\(truck): committed \(String(describing: afterStop[truck]))")
            }

            // A new engine, and the producer sends what the message named, then the rest.
            feed.close()
            daemon = try DaemonProcess(
                ["run", "--source", "json:" + fifo, "--state-dir", state], logPath: cli.dir.file("run2.log"),
                environment: env)
            feed = try CountingFeed(fifo: fifo)
            let resent = drive[..<sent].filter { fix in resendFrom[fix.truck].map { fix.time >= $0 } ?? false }
            feed.send(resent.map(\.line))
            feed.send(drive[sent...].map(\.line))
            #expect(await waitCommitted(upTo: drive.count, timeout: 30), "\(daemon.log)")
            #expect(await daemon.stop() != nil)
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")

            let store = try StateStore(directory: state)
            #expect(try store.integrityCheck().isEmpty)
            let live = try store.outbox.events(after: 0, limit: 100_000).filter { $0.region != nil }.map {
                try DaemonTests.essence(JSON.parse($0.body))
            }
            try withCLI { reference in
                for add in Self.regions() { #expect(try reference.run(add).status == 0) }
                // From a file: 3,000 lines on a pipe would fill it while the harness does not yet read the output.
                let recording = reference.dir.file("drive.jsonl")
                try (drive.map(\.line).joined(separator: "\n") + "\n").write(
                    toFile: recording, atomically: true, encoding: .utf8)
                let replay = try reference.run(["replay", recording])
                #expect(replay.status == 0, "\(replay.stderr)")
                let expected = try replay.lines.map { try DaemonTests.essence(JSON.parse($0)) }
                #expect(live.count == expected.count)
                #expect(live == expected)
                print(
                    "full disk stop: exit \(stopStatus), stopped in "
                        + String(format: "%.2f s", stopSeconds ?? -1) + "; \(resent.count) fixes sent again for "
                        + "\(resendFrom.count) vehicles; \(live.count)/\(expected.count) events, none lost; the stop said: "
                        + (message ?? "-"))
            }
        }
    }
}

import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Nobody can jam the control socket: slow half-written requests, many connections from one user.
@Suite(
    "control socket limits", .serialized,
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
        "needs /usr/bin/python3 and setpriv for the slow clients"))
struct ControlSocketLimitTests {
    /// Opens N connections to the socket, each sending `{"meth` and then one byte every 2 s, and reports
    /// (one JSON line) how many were answered at once, then (another line, after the given seconds) how
    /// each one ended: cut off, busy, or still open.
    static let slowLoris = """
        import json, select, socket, sys, time
        path, n, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
        socks = []
        for i in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                s.send(b'{"meth')
            except OSError:
                pass
            socks.append(s)
        data = {s: b"" for s in socks}
        done = set()
        def drain(timeout):
            r, _, _ = select.select([s for s in socks if s not in done], [], [], timeout)
            for s in r:
                try:
                    chunk = s.recv(65536)
                except OSError:
                    chunk = b""
                data[s] += chunk
                if not chunk:
                    done.add(s)
        t = time.time()
        while time.time() - t < 1.5:
            drain(0.2)
        print(json.dumps({"answered": sum(1 for s in socks if data[s])}), flush=True)
        start = time.time()
        while time.time() - start < hold:
            for s in socks:
                if s not in done:
                    try:
                        s.send(b"o")
                    except OSError:
                        pass
            drain(2.0)
        busy = sum(1 for s in socks if b'"busy"' in data[s])
        cut = sum(1 for s in socks if s in done and b"not complete within" in data[s])
        still = sum(1 for s in socks if s not in done)
        print(json.dumps({"busy": busy, "cut": cut, "open": still}), flush=True)
        """

    @Test("512 slow half-written requests from one user: authorized adds go through, the slow ones are cut off")
    func slowLoris() async throws {
        let e = try await ControlSocketTests.Engine()
        let script = e.cli.dir.file("slowloris.py")
        try Self.slowLoris.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(e.cli.dir.path, 0o755)
        chmod(script, 0o644)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        let uid = ControlSocketTests.stranger
        process.arguments = [
            "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", script, e.socket, "512", "12",
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let lines = LineCollector(out.fileHandleForReading)
        let first = try #require(await lines.next(timeout: 30), "the slow clients never connected")
        // Those over the user's share were told `busy` at once.
        #expect((try JSON.parse(first)["answered"]?.intValue ?? 0) >= 512 - 64, "\(first)")

        // An authorized user's add and list, within 2 s each, while the slow clients hold what they may.
        for i in 0..<3 {
            let started = Date()
            let added = try e.cli.run("add", "--id", "during-\(i)", "--lat", "1", "--lon", "1", "--radius", "50")
            #expect(added.status == 0, "\(added.stderr)")
            #expect(Date().timeIntervalSince(started) < 2)
        }
        // The slow user itself is told busy, as one exit status (75), never 69.
        let busy = try e.asStranger(["list"])
        #expect(busy.status == 75, "\(busy)")

        let last = try #require(await lines.next(timeout: 30), "the slow clients never reported")
        let report = try JSON.parse(last)
        #expect(report["open"]?.intValue == 0, "every slow request was cut off in time: \(last)")
        #expect((report["cut"]?.intValue ?? 0) > 0, "\(last)")
        #expect((report["busy"]?.intValue ?? 0) + (report["cut"]?.intValue ?? 0) == 512, "\(last)")
        process.waitUntilExit()
        #expect(try e.cli.ids().contains("during-2"))
        await e.stop()
    }
}

extension ControlSocketLimitTests {
    @Test("slow clients of many users fill all but the reserve: a granted user still gets in, another is told busy")
    func reserveForAuthorizedUsers() async throws {
        let e = try await ControlSocketTests.Engine()
        #expect(try e.cli.run("permission", "grant", String(ControlSocketTests.stranger)).status == 0)
        let script = e.cli.dir.file("slowloris.py")
        try Self.slowLoris.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)
        // 15 users without accounts, 32 connections each (each user's most): 480, more than the 448 that
        // users who are not authorized may hold together.
        var uids: [UInt32] = []
        var uid = ControlSocketTests.stranger + 1
        while uids.count < 16 {
            if getpwuid(uid) == nil { uids.append(uid) }
            uid += 1
        }
        let outsider = uids.removeLast()
        var attackers: [(Process, LineCollector)] = []
        for uid in uids {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", script, e.socket, "32", "6",
            ]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            attackers.append((process, LineCollector(out.fileHandleForReading)))
        }
        var turnedAway = 0
        for (_, lines) in attackers {
            let first = try #require(await lines.next(timeout: 30), "a slow client never connected")
            turnedAway += try JSON.parse(first)["answered"]?.intValue ?? 0
        }
        #expect(turnedAway >= 16, "about 32 of the 480 were told busy at once: \(turnedAway)")

        let granted = try e.asStranger(["list", "--json"])
        #expect(granted.status == 0, "the granted user takes the reserve: \(granted.stderr)")
        let refused = try GeofenceBinary.runAs(
            uid: outsider, ["list", "--socket", e.socket], environment: ["HOME": "/tmp", "GEOFENCE_SOCKET": e.socket])
        #expect(refused.status == 75, "\(refused)")
        #expect(refused.stderr.contains("kept for authorized users"), "\(refused.stderr)")
        #expect(try e.cli.run("add", "--id", "root", "--lat", "1", "--lon", "1", "--radius", "50").status == 0)
        for (process, _) in attackers { process.terminate() }
        for (process, _) in attackers { process.waitUntilExit() }
        await e.stop()
    }
}

/// Lines from a pipe, read on a thread of their own.
final class LineCollector: @unchecked Sendable {
    // @unchecked: `lines` is only touched under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 10) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    lock.withLock { lines.append(line) }
                }
            }
        }
    }

    /// The next line not yet taken, waiting up to `timeout` seconds.
    func next(timeout: Double) async -> String? {
        await Wait.value(timeout: timeout, every: .milliseconds(50)) {
            lock.withLock { lines.isEmpty ? nil : lines.removeFirst() }
        }
    }
}

import Foundation
import GeofenceCore
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `permission.request` is open to users nobody has authorized: it must not let them flood the outbox, run
/// root's hooks at will or put escapes into what hooks and sinks receive.
@Suite("permission requests", .serialized)
struct PermissionRequestTests {
    /// The stranger's `authorization` events in the outbox.
    static func strangerEvents(_ e: ControlSocketTests.Engine) throws -> [JSONValue] {
        try GeofenceStoreProbe.events(e.cli.stateDir).map { try JSON.parse($0) }.filter {
            $0["type"]?.stringValue == "authorization"
                && $0["uid"]?.intValue == Int(ControlSocketTests.stranger)
        }
    }

    @Test("a repeated request changes nothing and makes no event; after a reset the user may ask again")
    func onePendingRequest() async throws {
        let e = try await ControlSocketTests.Engine()
        let first = try e.asStranger(["permission", "request", "--reason", "first"])
        #expect(first.status == 0 && first.stdout.contains("request recorded"), "\(first)")
        for _ in 0..<3 {
            let again = try e.asStranger(["permission", "request", "--reason", "second"])
            #expect(again.status == 0 && again.stdout.contains("already pending"), "\(again)")
        }
        #expect(try Self.strangerEvents(e).count == 1)
        let listed = try JSON.parse(try e.cli.run("permission", "list", "--json").stdout).arrayValue ?? []
        let entry = listed.first { $0["uid"]?.intValue == Int(ControlSocketTests.stranger) }
        #expect(entry?["reason"]?.stringValue == "first", "the repeat changed nothing: \(listed)")

        #expect(try e.cli.run("permission", "reset", String(ControlSocketTests.stranger)).status == 0)
        let anew = try e.asStranger(["permission", "request", "--reason", "third"])
        #expect(anew.status == 0 && anew.stdout.contains("request recorded"), "\(anew)")
        #expect(try Self.strangerEvents(e).count == 2)
        await e.stop()
    }

    @Test("a flood of requests from several connections makes one event, and is held to the rate limit")
    func floodIsBounded() async throws {
        let e = try await ControlSocketTests.Engine()
        // Root's hook for every event: it must run once for the stranger's request, not once a request.
        let ran = e.cli.dir.file("ran")
        let hook = try e.cli.run("hook", "add", "--on", "all", "--command", "echo \"$GEOFENCE_EVENT\" >> '\(ran)'")
        #expect(hook.status == 0, "\(hook)")
        let started = Date()
        let answers = Mutex<[String: Int]>([:])
        let threads = (0..<4).map { _ in
            OtherUserThread(uid: ControlSocketTests.stranger) {
                guard let client = try? RawClient(e.socket) else { return }
                defer { client.close() }
                for i in 0..<150 {
                    let line = #"{"method":"permission.request","params":{"reason":"flood \#(i)"}}"#
                    guard let answer = try? JSON.parse(client.exchange(line)) else { return }
                    let kind = answer["ok"]?.boolValue == true ? "ok" : answer["error"]?["code"]?.stringValue ?? "?"
                    answers.withLock { $0[kind, default: 0] += 1 }
                }
            }
        }
        for thread in threads { thread.wait() }
        let seconds = Date().timeIntervalSince(started)
        let counts = answers.withLock { $0 }
        #expect(counts.values.reduce(0, +) == 600, "every request was answered: \(counts)")
        // At most the burst of 30 and 10 a second went through; the rest were told busy.
        #expect(counts["ok", default: 0] <= 30 + Int((seconds * 10).rounded(.up)) + 1, "\(counts) in \(seconds) s")
        #expect(counts["busy", default: 0] > 0, "\(counts) in \(seconds) s")
        #expect(try Self.strangerEvents(e).count == 1)
        #expect(e.daemon.isRunning)
        let deadline = Date().addingTimeInterval(10)
        func runs() -> Int {
            ((try? String(contentsOfFile: ran, encoding: .utf8)) ?? "").split(separator: "\n").filter {
                $0 == "authorization"
            }.count
        }
        _ = await Wait.until(timeout: deadline.timeIntervalSinceNow, every: .milliseconds(20)) { runs() > 0 }
        #expect(runs() == 1, "root's hook ran once for the stranger's requests")
        // The limit is the stranger's alone: root is not held to it.
        for i in 0..<40 {
            #expect(try e.cli.run("add", "--id", "r\(i)", "--lat", "1", "--lon", "1", "--radius", "5").status == 0)
        }
        await e.stop()
    }

    @Test("an import in parts whose first part is over the rate limit fails whole, even once the limit allows")
    func importOverTheLimitFailsWhole() async throws {
        let e = try await ControlSocketTests.Engine()
        #expect(try e.cli.run("permission", "grant", String(ControlSocketTests.stranger)).status == 0)
        let answers = Mutex<[String]>([])
        OtherUserThread(uid: ControlSocketTests.stranger) {
            guard let client = try? RawClient(e.socket) else { return }
            defer { client.close() }
            func send(_ line: String) { answers.withLock { $0.append((try? client.exchange(line)) ?? "") } }
            // The burst, spent on removals of nothing (refused, but each a change).
            for _ in 0..<30 { send(#"{"method":"remove","params":{"ids":["none"]}}"#) }
            send(#"{"method":"import","params":{"regions":[{"id":"a","lat":1,"lon":1,"radius":9}],"final":false}}"#)
            // The limit lets changes through again after a time, by design: nothing to wait for but the time.
            Thread.sleep(forTimeInterval: 0.5)
            send(#"{"method":"import","params":{"regions":[{"id":"b","lat":1,"lon":1,"radius":9}],"final":true}}"#)
        }.wait()
        let all = answers.withLock { $0 }
        #expect(all.count == 32, "\(all)")
        #expect(all.dropLast().last?.contains(#""code":"busy""#) == true, "\(all)")
        #expect(all.last?.contains(#""code":"busy""#) == true, "the final part fails with the import: \(all)")
        #expect(try e.cli.ids().isEmpty, "nothing of the import was stored")
        await e.stop()
    }

    @Test("a reason that is too long or holds escapes, bidi or invisible characters is refused and stores nothing")
    func hostileReasonRefused() async throws {
        let e = try await ControlSocketTests.Engine()
        for reason in [
            String(repeating: "a", count: 257), "title\u{1B}]0;owned\u{07}", "line\nbreak", "tab\there",
            "abc\u{202E}gpj.exe", "zero\u{200B}width", "del\u{7F}", "c1\u{9B}31m",
        ] {
            let refused = try e.asStranger(["permission", "request", "--reason", reason])
            #expect(refused.status == 65, "\(reason.debugDescription): \(refused)")
            #expect(refused.stderr.contains("reason"), "\(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
            #expect(!refused.stderr.contains("\u{1B}") && !refused.stderr.contains("\u{202E}"), "\(refused.stderr)")
        }
        #expect(try Self.strangerEvents(e).isEmpty)
        let listed = try JSON.parse(try e.cli.run("permission", "list", "--json").stdout).arrayValue ?? []
        #expect(!listed.contains { $0["uid"]?.intValue == Int(ControlSocketTests.stranger) }, "\(listed)")
        let fine = try e.asStranger(["permission", "request", "--reason", "Fahrtenbuch für die Flotte, 256 B max"])
        #expect(fine.status == 0, "\(fine)")
        #expect(try Self.strangerEvents(e).first?["reason"]?.stringValue?.contains("Fahrtenbuch") == true)
        await e.stop()
    }
}

/// A thread of this process that runs `body` with another effective uid and gid, changed for that thread
/// only (the raw system calls: glibc's `setresuid` would change every thread's), so that the kernel
/// reports `uid` as the peer of the sockets it connects. Tests run as root.
final class OtherUserThread: @unchecked Sendable {
    // @unchecked: `done` is a semaphore; the thread owns the rest.
    private let done = DispatchSemaphore(value: 0)

    private typealias Syscall = @convention(c) (Int, Int, Int, Int) -> Int
    private static let syscall: Syscall = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syscall")!, to: Syscall.self)
    #if arch(x86_64)
        private static let setresuid = 117
        private static let setresgid = 119
    #elseif arch(arm64)
        private static let setresuid = 147
        private static let setresgid = 149
    #endif

    init(uid: UInt32, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread { [done] in
            // Real and saved ids stay root's (-1: unchanged), so the thread could change back; it just ends.
            let gid = Self.syscall(Self.setresgid, -1, Int(uid), -1)
            let changed = Self.syscall(Self.setresuid, -1, Int(uid), -1)
            if gid == 0 && changed == 0 && geteuid() == uid { body() }
            done.signal()
        }
        thread.start()
    }

    func wait() { done.wait() }
}

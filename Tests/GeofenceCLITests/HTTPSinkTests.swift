import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence sink add --http URL` against a real HTTP server on loopback (`Scripts/webhook-receiver.py`):
/// events POSTed in order with their id and a signature the receiver checks with Python's own HMAC; retries,
/// dead letters, the timeout, keep-alive, and nothing lost across engine kills.
@Suite(
    "HTTP webhook sink against a real receiver", .serialized,
    .enabled(if: WebhookReceiver.isAvailable, "\(WebhookReceiver.unavailableReason)"))
struct HTTPSinkTests {
    /// Two regions on the road west, so that each vehicle makes six events (determined, enter, exit for each).
    static func setUp() throws -> CLI {
        let cli = try CLI()
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        let yard = MQTTSourceTests.longitude(-300)
        #expect(try cli.run("add", "--id", "yard", "--lat", "48.85", "--lon", "\(yard)", "--radius", "60").status == 0)
        return cli
    }

    /// The drive of `vehicles` trucks west through both regions.
    static func drive(_ vehicles: Int) -> [String] {
        (0...16).flatMap { step in (0..<vehicles).map { MQTTSourceTests.tpv(step, device: "truck-\($0)") } }
    }

    static func secret(_ cli: CLI) throws -> String {
        let file = cli.dir.file("webhook.secret")
        try "whsec-test-0123456789\n".write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// The requests the receiver acknowledged (200), as event ids.
    static func acknowledged(_ receiver: WebhookReceiver) -> [String] {
        receiver.requests().filter { $0.answer == "200" }.compactMap(\.eventID)
    }

    /// The outbox's events of the drive (determined, enter, exit: what the sinks here take).
    static func crossings(_ cli: CLI) throws -> [StoredEvent] {
        try MQTTSinkTests.outbox(cli).filter { ["determined", "enter", "exit"].contains($0.type) }
    }

    static let on = ["--on", "determined,enter,exit"]

    /// Until `count` crossings are in the outbox and each (but `except`) has been acknowledged at least once.
    static func waitForAll(
        _ cli: CLI, _ receiver: WebhookReceiver, count: Int, except: Int? = nil, timeout: Double = 20
    ) async throws -> Bool {
        try await Wait.until(timeout: timeout, every: .milliseconds(50)) {
            var owed = try Self.crossings(cli)
            guard owed.count >= count else { return false }
            if let except { owed.remove(at: except) }
            return Set(Self.acknowledged(receiver)).isSuperset(of: owed.map(\.id))
        }
    }

    @Test("POSTed in order, signed, with the event id; 503, 429 and 408 retried; 404 a dead letter; one connection")
    func delivers() async throws {
        let cli = try Self.setUp()
        defer { cli.dir.remove() }
        let secret = try Self.secret(cli)
        let receiver = try WebhookReceiver(directory: cli.dir.path, secretFile: secret)
        // Event 1: 503 then 200. Event 2: 429, 408, then 200. Event 3: 404, given up. The rest: 200.
        try receiver.plan(["503 busy", "200", "429 slow down", "408", "200", #"404 {"error":"unknown vehicle"}"#])
        let added = try cli.run(
            "sink", "add", "--id", "backend", "--http", receiver.url, "--secret-file", secret, "--header",
            "Authorization: Bearer tok-s3cret", "--header", "X-Tenant:  acme ", "--on", "determined,enter,exit")
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout == "Added sink \"backend\": determined,enter,exit events to \(receiver.url)\n")

        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send(Self.drive(5))
        #expect(try await Self.waitForAll(cli, receiver, count: 30, except: 2), "\(daemon.log)")
        let listed = try await MQTTSinkTests.sinks(cli) { $0.first?["waiting"]?.intValue == 0 }
        #expect(await daemon.stop() != nil)

        let outbox = try Self.crossings(cli)
        let requests = receiver.requests()
        #expect(outbox.count == 30, "\(outbox.map(\.type))")
        // In commit order, each event acknowledged once, but the dead letter.
        let dead = outbox[2]
        #expect(Self.acknowledged(receiver) == outbox.map(\.id).filter { $0 != dead.id }, "\(requests.map(\.answer))")
        #expect(requests.prefix(6).map(\.answer) == ["503", "200", "429", "408", "200", "404"])
        #expect(requests.prefix(6).map(\.eventID) == [0, 0, 1, 1, 1, 2].map { outbox[$0].id })
        for request in requests {
            #expect(request.verified == true, "signature of request \(request.number): \(request.headers)")
            #expect(request.body == outbox.first { $0.id == request.eventID }?.body, "the event's JSON, as stored")
            #expect(request.headers["content-type"] == "application/json")
            #expect(request.headers["x-geofence-event-type"] == (try? JSON.parse(request.body))?["type"]?.stringValue)
            #expect(request.headers["authorization"] == "Bearer tok-s3cret")
            #expect(request.headers["x-tenant"] == "acme")
            #expect(request.headers["expect"] == nil, "no 100-continue round trip")
        }
        #expect(Set(requests.map(\.connection)) == [1], "keep-alive: one connection for \(requests.count) requests")

        // The dead letter: where hook deliveries keep theirs, with the status and the body.
        let deadJSON = try cli.run("events", "--dead", "--json")
        let letters = try JSON.parse(deadJSON.stdout).arrayValue ?? []
        #expect(letters.count == 1, "\(deadJSON.stdout)")
        #expect(letters.first?["id"]?.stringValue == dead.id)
        let letter = letters.first?["deliveries"]?.arrayValue?.first
        #expect(letter?["hook"]?.stringValue == "sink:backend", "\(deadJSON.stdout)")
        #expect(letter?["status"]?.stringValue == "dead")
        #expect(letter?["lastError"]?.stringValue == "HTTP 404")
        #expect(letter?["stdout"]?.stringValue == #"{"error":"unknown vehicle"}"#)
        #expect(letter?["command"]?.stringValue == "POST " + receiver.url)
        let deadText = try cli.run("events", "--dead")
        #expect(deadText.stdout.contains("sink:backend") && deadText.stdout.contains("HTTP 404"), "\(deadText.stdout)")
        // Not a hook's to run: retry leaves it alone, and says why.
        let retry = try cli.run("events", "retry", dead.id)
        #expect(retry.status == 65, "\(retry.stderr)")
        #expect(retry.stderr.contains("a sink's dead letter is not retried"), "\(retry.stderr)")
        let all = try cli.run("events", "retry", "--all-dead")
        #expect(all.status == 0 && all.stdout.contains("No dead deliveries."), "\(all.stdout)\(all.stderr)")
        #expect(try cli.run("events", "--dead", "--json").stdout == deadJSON.stdout, "still dead, never pending")
        #expect(daemon.log.contains("refused with HTTP 404"), "\(daemon.log)")

        // Listed with its headers' names only (a value may be a credential), and where its secret is.
        let sink = listed.first
        #expect(sink?["kind"]?.stringValue == "http", "\(listed)")
        #expect(sink?["headers"] == ["Authorization", "X-Tenant"])
        #expect(sink?["secretFile"]?.stringValue == secret)
        #expect(sink?["signed"] == true)
        #expect(sink?["connected"] == true)
        for (what, text) in [
            ("list", try cli.run("sink", "list", "--json").stdout), ("log", daemon.log),
            (
                "status",
                try cli.run(["status", "--json", "--wait", "1s"], environment: FleetSourceTests.deadGPSD()).stdout
            ),
        ] {
            #expect(!text.contains("tok-s3cret") && !text.contains("whsec-test"), "\(what) shows a secret")
        }
    }

    @Test("a receiver that hangs is cut off by the timeout and the event sent again on a new connection")
    func timeout() async throws {
        let cli = try Self.setUp()
        defer { cli.dir.remove() }
        let receiver = try WebhookReceiver(directory: cli.dir.path)
        try receiver.plan(["hang 30"])
        #expect(
            try cli.run(["sink", "add", "--id", "slow", "--http", receiver.url, "--timeout", "500ms"] + Self.on).status
                == 0)
        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        let started = Date()
        feed.send(Self.drive(1))
        #expect(try await Self.waitForAll(cli, receiver, count: 6), "\(daemon.log)")
        let took = Date().timeIntervalSince(started)
        let requests = receiver.requests()
        let outbox = try Self.crossings(cli)
        #expect(Self.acknowledged(receiver) == outbox.map(\.id))
        #expect(requests.first?.answer == "hang")
        #expect(requests.first?.eventID == outbox.first?.id)
        #expect(requests.count == outbox.count + 1, "\(requests.map(\.answer))")
        #expect(Set(requests.dropFirst().map(\.connection)) == [2], "the hung connection dropped, one new one kept")
        #expect(took < 10, "\(took) s: cut off at 0.5 s, not left hanging for 30")
        #expect(daemon.log.contains("Operation timed out") || daemon.log.contains("timed out"), "\(daemon.log)")

        // A stop is not held up by a request under way (here: one that would hang for 30 s, with a 60 s limit).
        #expect(try cli.run("sink", "remove", "slow").status == 0)
        #expect(try cli.run("sink", "add", "--id", "patient", "--http", receiver.url, "--timeout", "60s").status == 0)
        receiver.stop()
        try receiver.plan(["hang 30"])
        try receiver.start()
        feed.send(Self.drive(2).map { $0.replacingOccurrences(of: "truck-", with: "van-") })
        #expect(await daemon.waitForLog("sink patient: delivering", timeout: 5), "\(daemon.log)")
        #expect(await Wait.until(timeout: 5) { receiver.requests().filter { $0.answer == "hang" }.count == 2 })
        let stopTook = await daemon.stop()
        #expect(stopTook != nil && stopTook! < 2.5, "\(String(describing: stopTook)) s: \(daemon.log)")
    }

    @Test("the engine SIGKILLed during delivery: every event acknowledged at least once, in order per region")
    func engineKills() async throws {
        let cli = try Self.setUp()
        defer { cli.dir.remove() }
        // A slow receiver (10 ms an answer), so that the kills fall in the middle of a backlog.
        let receiver = try WebhookReceiver(directory: cli.dir.path, delay: 0.01)
        #expect(try cli.run(["sink", "add", "--id", "backend", "--http", receiver.url] + Self.on).status == 0)
        var (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send(Self.drive(40))
        _ = try await Wait.until(timeout: 15) { try Self.crossings(cli).count >= 240 }
        var kills = 0
        var before = 0
        while kills < 5 {
            // Until the receiver has had a few more, then killed mid-backlog: there is nothing else to wait for.
            _ = await Wait.until(timeout: 10, every: .milliseconds(20)) {
                receiver.requests().count >= before + 15
            }
            #expect(await daemon.stop(signal: SIGKILL) != nil)
            kills += 1
            before = receiver.requests().count
            feed.close()
            (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli, log: "run-\(kills).log")
        }
        defer { feed.close() }
        let outbox = try Self.crossings(cli)
        #expect(outbox.count == 240, "\(outbox.count)")
        #expect(try await Self.waitForAll(cli, receiver, count: outbox.count, timeout: 30), "\(daemon.log)")
        #expect(await daemon.stop() != nil)
        let received = receiver.requests().compactMap(\.eventID)
        let report = MQTTSinkTests.compare(outbox: outbox, received: received)
        print(
            "http sink engine kills: \(kills) SIGKILLs, \(outbox.count) events, \(received.count) requests, "
                + "\(report.lost) lost, \(report.duplicates) duplicates, order per region kept: \(report.ordered)")
        #expect(before < outbox.count, "killed before the backlog was done")
        #expect(report.lost == 0)
        #expect(report.ordered)
        #expect(received.count - report.duplicates == outbox.count)
    }

    @Test("the receiver restarted 10 times during a backlog: every event acknowledged, in order per region")
    func receiverRestarts() async throws {
        let cli = try Self.setUp()
        defer { cli.dir.remove() }
        let receiver = try WebhookReceiver(directory: cli.dir.path, delay: 0.005)
        #expect(try cli.run(["sink", "add", "--id", "backend", "--http", receiver.url] + Self.on).status == 0)
        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send(Self.drive(40))
        var restarts = 0
        var before = 0
        while restarts < 10 {
            // A few more requests, then the receiver goes: its connection with it, an answer perhaps unsent.
            _ = await Wait.until(timeout: 10, every: .milliseconds(10)) { receiver.requests().count >= before + 8 }
            receiver.stop()
            // Away for a moment: there is nothing to wait for.
            try await Task.sleep(for: .milliseconds(Int.random(in: 20...200)))
            try receiver.start()
            restarts += 1
            before = receiver.requests().count
        }
        #expect(try await Self.waitForAll(cli, receiver, count: 240, timeout: 30), "\(daemon.log)")
        #expect(await daemon.stop() != nil)
        let outbox = try Self.crossings(cli)
        let received = receiver.requests().compactMap(\.eventID)
        let report = MQTTSinkTests.compare(outbox: outbox, received: received)
        print(
            "http sink receiver restarts: \(restarts) restarts, \(outbox.count) events, \(received.count) requests, "
                + "\(report.lost) lost, \(report.duplicates) duplicates, order per region kept: \(report.ordered)")
        #expect(before < outbox.count, "restarted before the backlog was done")
        #expect(report.lost == 0)
        #expect(report.ordered)
        #expect(report.duplicates <= restarts, "at most the one request a restart cut short, each time")
    }

    @Test("--batch: up to N events a request as a JSON array, signed; a refused batch is N dead letters")
    func batches() async throws {
        let cli = try Self.setUp()
        defer { cli.dir.remove() }
        let secret = try Self.secret(cli)
        let receiver = try WebhookReceiver(directory: cli.dir.path, secretFile: secret)
        // Away while the events are committed, so that the sink has all 12 when it comes back.
        receiver.stop()
        try receiver.plan(["400 nope"])
        let added = try cli.run(
            ["sink", "add", "--id", "batched", "--http", receiver.url, "--batch", "10", "--secret-file", secret]
                + Self.on)
        #expect(added.status == 0, "\(added.stderr)")
        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send(Self.drive(2))
        #expect(try await Wait.until(timeout: 10) { try Self.crossings(cli).count == 12 })
        try receiver.start()
        #expect(await Wait.until(timeout: 10) { receiver.requests().count >= 2 }, "\(daemon.log)")
        let listed = try await MQTTSinkTests.sinks(cli) { $0.first?["waiting"]?.intValue == 0 }
        #expect(await daemon.stop() != nil)

        let outbox = try Self.crossings(cli)
        let requests = receiver.requests()
        #expect(requests.count == 2, "\(requests.map(\.body))")
        func ids(_ r: WebhookReceiver.Request?) -> [String] {
            (r.flatMap { try? JSON.parse($0.body) }?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        }
        #expect(ids(requests.first) == outbox.prefix(10).map(\.id))
        #expect(ids(requests.last) == outbox.suffix(2).map(\.id))
        #expect(requests.first?.headers["x-geofence-event-count"] == "10")
        #expect(requests.first?.headers["x-geofence-first-event-id"] == outbox[0].id)
        #expect(requests.first?.headers["x-geofence-last-event-id"] == outbox[9].id)
        #expect(requests.allSatisfy { $0.verified == true && $0.eventID == nil })
        #expect(requests.last?.body == "[" + outbox.suffix(2).map(\.body).joined(separator: ",") + "]")
        let dead = try JSON.parse(cli.run("events", "--dead", "--json").stdout).arrayValue ?? []
        #expect(dead.compactMap { $0["id"]?.stringValue } == outbox.prefix(10).map(\.id))
        #expect(listed.first?["batch"]?.intValue == 10, "\(listed)")
    }

    @Test("HTTPS: trusted with --http-ca; without it, the system's CAs refuse a private CA's certificate")
    func https() async throws {
        let cli = try Self.setUp()
        defer { cli.dir.remove() }
        let receiver = try WebhookReceiver(directory: cli.dir.path, tls: true)
        let ca = try #require(receiver.caFile)
        #expect(receiver.url.hasPrefix("https://"))
        let trusted = try cli.run(
            ["sink", "add", "--id", "trusted", "--http", receiver.url, "--http-ca", ca] + Self.on)
        #expect(trusted.status == 0, "\(trusted.stderr)")
        #expect(try cli.run(["sink", "add", "--id", "system", "--http", receiver.url] + Self.on).status == 0)
        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send(Self.drive(2))
        #expect(try await Self.waitForAll(cli, receiver, count: 12), "\(daemon.log)")
        let listed = try await MQTTSinkTests.sinks(cli) { sinks in
            sinks.first { $0["id"]?.stringValue == "system" }?["problem"] != nil
        }
        #expect(await daemon.stop() != nil)
        #expect(Self.acknowledged(receiver) == (try Self.crossings(cli)).map(\.id), "once each, in order")
        #expect(Set(receiver.requests().map(\.connection)) == [1], "one TLS connection")
        let byID = Dictionary(uniqueKeysWithValues: listed.map { ($0["id"]?.stringValue ?? "", $0) })
        #expect(byID["trusted"]?["caFile"]?.stringValue == ca)
        #expect(byID["trusted"]?["waiting"]?.intValue == 0, "\(listed)")
        #expect(byID["system"]?["waiting"]?.intValue == 12, "\(listed)")
        #expect(byID["system"]?["problem"]?.stringValue?.contains("certificate") == true, "\(listed)")
    }

    @Test("bad input is one line, exit 64 or 66, and stores nothing")
    func commands() throws {
        try withCLI { cli in
            let secret = try Self.secret(cli)
            for (arguments, status, message) in [
                (["--http", "ftp://x"], Int32(64), "it does not start with http:// or https://"),
                (["--http", "http://u:pw@127.0.0.1/hook"], 64, "takes no user or password"),
                (["--http", "http://127.0.0.1/a b"], 64, "contains a space"),
                (["--http", "http:///path"], 64, "not a URL with a host"),
                (["--http", "http://127.0.0.1/", "--secret-file", "/no/such/secret"], 66, "no such file"),
                (["--http", "http://127.0.0.1/", "--secret-file", "webhook.secret"], 64, "give an absolute path"),
                (["--http", "http://127.0.0.1/", "--header", "X-Tenant acme"], 64, "is not Name: value"),
                (["--http", "http://127.0.0.1/", "--header", "X Tenant: acme"], 64, "is not a header name"),
                (["--http", "http://127.0.0.1/", "--header", "X-Tenant: a\r\nX-Evil: b"], 64, "control character"),
                (
                    ["--http", "http://127.0.0.1/", "--header", "Content-Type: text/plain"], 64,
                    "set by the sink itself"
                ),
                (["--http", "http://127.0.0.1/", "--header", "X-Geofence-Signature: x"], 64, "set by the sink itself"),
                (["--http", "http://127.0.0.1/", "--http-ca", "/etc/hostname"], 64, "--http-ca is for TLS"),
                (["--http", "https://127.0.0.1/", "--http-ca", "/no/such/ca.pem"], 66, "no such file"),
                (["--http", "http://127.0.0.1/", "--timeout", "0"], 64, "give 100ms to 300s"),
                (["--http", "http://127.0.0.1/", "--batch", "1001"], 64, "is not 1 to 1000"),
                (["--http", "http://127.0.0.1/", "--topic", "x"], 64, "--topic is for an MQTT sink"),
                (["--mqtt", "mqtt://127.0.0.1", "--secret-file", secret], 64, "--secret-file is for a webhook"),
                (["--mqtt", "mqtt://127.0.0.1", "--http", "http://127.0.0.1/"], 64, "not both"),
                ([], 64, "give --mqtt URL (a broker) or --http URL (a webhook)"),
            ] as [([String], Int32, String)] {
                let result = try cli.run(["sink", "add"] + arguments)
                #expect(result.status == status, "\(arguments): \(result.stderr)")
                #expect(
                    result.stderr.hasPrefix("Error: ") && result.stderr.contains(message),
                    "\(arguments): \(result.stderr)")
                // The error in one line; a usage error (64) is followed by the usage, as every command's is.
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.filter { $0.hasPrefix("Error: ") }.count == 1, "\(result.stderr)")
                #expect(lines.count == 1 || (status == 64 && lines[1].hasPrefix("Usage: ")), "\(result.stderr)")
                #expect(!result.stderr.contains("pw@"))
            }
            #expect(try cli.run("sink", "list", "--json").stdout == "[]\n", "nothing was stored")
            // Through the socket's own checks too (a client that is not the CLI): the same rules.
            let made = try cli.run(
                "sink", "add", "--id", "hook", "--http", "https://127.0.0.1:8443/hook", "--on", "enter,exit",
                "--timeout", "2.5s", "--secret-file", secret, "--json")
            #expect(made.status == 0, "\(made.stderr)")
            let sink = try JSON.parse(made.stdout)
            #expect(sink["kind"]?.stringValue == "http")
            #expect(sink["url"]?.stringValue == "https://127.0.0.1:8443/hook")
            #expect(sink["on"] == ["enter", "exit"])
            #expect(sink["timeout"]?.doubleValue == 2.5)
            #expect(sink["topic"] == nil)
            let table = try cli.run("sink", "list")
            #expect(table.stdout.contains("https://127.0.0.1:8443/hook"), "\(table.stdout)")
            #expect(try cli.run("sink", "remove", "hook").status == 0)
            let help = try cli.run("sink", "add", "--help")
            #expect(help.stdout.contains("--http") && help.stdout.contains("X-Geofence-Signature"), "\(help.stdout)")
        }
    }
}

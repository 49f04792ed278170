import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceTestSupport
import Testing

/// Holds a value so `#expect` can call its mutating methods (the macro can't mutate a local).
@dynamicMemberLookup
final class Driven<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
    subscript<T>(dynamicMember keyPath: KeyPath<Value, T>) -> T { value[keyPath: keyPath] }
}

extension Driven where Value == SourceLiveness {
    func advance(to now: Double) -> SourceLiveness.Transition? { value.advance(to: now) }
    func usableFix(at now: Double) -> SourceLiveness.Transition? { value.usableFix(at: now) }
    func connectionDropped(at now: Double) -> SourceLiveness.Transition? { value.connectionDropped(at: now) }
    func restart(at now: Double) { value.restart(at: now) }
}

extension Driven where Value == CapabilitySnapshot {
    func learn(from fix: Fix, previousFixTime: Date?) -> Bool {
        value.learn(from: fix, previousFixTime: previousFixTime)
    }
    func update(_ device: CapabilitySnapshot.Device) -> Bool { value.update(device) }
    func removeDevice(at path: String) -> Bool { value.removeDevice(at: path) }
}

/// The pure parts: no gpsd, no clocks.
struct SourceLivenessTests {
    let configuration = SourceLiveness.Configuration(firstFixDeadline: 60, stalenessLimit: 10)

    @Test func silentOnceAtTheFirstFixDeadline() {
        let liveness = Driven(SourceLiveness(configuration: configuration, startedAt: 100))
        #expect(liveness.nextDeadline == 160)
        #expect(liveness.advance(to: 159.9) == nil)
        #expect(liveness.advance(to: 160) == .silent)
        #expect(liveness.state == .silent(since: 160))
        #expect(liveness.advance(to: 500) == nil)
        #expect(liveness.nextDeadline == nil)
        #expect(liveness.usableFix(at: 501) == .restored)
        #expect(liveness.usableFix(at: 502) == nil)
    }

    @Test func aFixBeforeTheDeadlineIsNotARestore() {
        let liveness = Driven(SourceLiveness(configuration: configuration, startedAt: 0))
        #expect(liveness.usableFix(at: 5) == nil)
        #expect(liveness.isReceiving)
        #expect(liveness.nextDeadline == 15)
        #expect(liveness.advance(to: 59) == .lost, "the first-fix deadline no longer applies; staleness does")
    }

    @Test func lostOnceWhenFixesStopThenRestored() {
        let liveness = Driven(SourceLiveness(configuration: configuration, startedAt: 0))
        _ = liveness.usableFix(at: 1)
        _ = liveness.usableFix(at: 2)
        #expect(liveness.advance(to: 11.9) == nil)
        #expect(liveness.advance(to: 12) == .lost)
        #expect(liveness.state == .lost(since: 12))
        #expect(liveness.advance(to: 100) == nil)
        #expect(liveness.connectionDropped(at: 101) == nil)
        #expect(liveness.usableFix(at: 102) == .restored)
        #expect(liveness.advance(to: 111) == nil)
        #expect(liveness.advance(to: 112) == .lost, "a new episode is reported again")
    }

    @Test func aDroppedConnectionIsLostAtOnceOnlyWhenFixesWereArriving() {
        let waiting = Driven(SourceLiveness(configuration: configuration, startedAt: 0))
        #expect(waiting.connectionDropped(at: 1) == nil)
        #expect(waiting.nextDeadline == 60, "the first-fix deadline keeps running")

        let running = Driven(SourceLiveness(configuration: configuration, startedAt: 0))
        _ = running.usableFix(at: 1)
        #expect(running.connectionDropped(at: 2) == .lost)
        #expect(running.connectionDropped(at: 3) == nil)
        #expect(running.usableFix(at: 4) == .restored)
    }

    @Test func aRestartDuringAnOutageStillOwesOneRestore() {
        let liveness = Driven(SourceLiveness(configuration: configuration, startedAt: 0))
        #expect(liveness.advance(to: 60) == .silent)
        liveness.restart(at: 70)
        #expect(liveness.nextDeadline == 130)
        #expect(liveness.advance(to: 130) == nil, "silent was already reported")
        #expect(liveness.usableFix(at: 131) == .restored)
    }

    /// Whether data arrives is the filter's judgement of the fix on its own, without its age.
    @Test func usableMeansATwoDimensionalFixWithAValidPositionAndATime() {
        func fix(_ mode: FixMode, _ latitude: Double?, _ longitude: Double?, time: Date? = Date()) -> Fix {
            Fix(subject: "d", time: time, mode: mode, latitude: latitude, longitude: longitude)
        }
        func usable(_ fix: Fix) -> Bool { FixFilter.classify(fix, now: nil, configuration: .init()).isUsable }
        #expect(usable(fix(.twoD, 1, 2)))
        #expect(usable(fix(.threeD, -89, 179)))
        #expect(usable(fix(.threeD, 1, 2, time: Date(timeIntervalSince1970: 0))), "an old fix is still data")
        #expect(!usable(fix(.noFix, 1, 2)))
        #expect(!usable(fix(.threeD, nil, 2)))
        #expect(!usable(fix(.threeD, 91, 2)))
        #expect(!usable(fix(.threeD, .nan, 2)))
        #expect(!usable(fix(.threeD, 0, 0)), "the filter refuses (0, 0)")
        #expect(!usable(fix(.threeD, 1, 2, time: nil)), "the filter refuses a fix without a time")
    }
}

struct GPSDAddressTests {
    @Test(
        arguments: [
            ("", "localhost", 2947, nil),
            ("localhost", "localhost", 2947, nil),
            ("gps.example.net", "gps.example.net", 2947, nil),
            ("127.0.0.1:2948", "127.0.0.1", 2948, nil),
            (":2948", "localhost", 2948, nil),
            ("host:", "host", 2947, nil),
            ("host:2948:/dev/ttyUSB0", "host", 2948, "/dev/ttyUSB0"),
            ("host::/dev/ttyUSB0", "host", 2947, "/dev/ttyUSB0"),
            ("::/dev/ttyUSB0", "localhost", 2947, "/dev/ttyUSB0"),
            ("/dev/ttyACM0", "localhost", 2947, "/dev/ttyACM0"),
            ("[::1]", "::1", 2947, nil),
            ("[::1]:2947", "::1", 2947, nil),
            ("[fe80::1%eth0]:3000:/dev/gps0", "fe80::1%eth0", 3000, "/dev/gps0"),
            ("localhost:2947:udp://127.0.0.1:5000", "localhost", 2947, "udp://127.0.0.1:5000"),
            ("h:65535", "h", 65535, nil),
        ] as [(String, String, Int, String?)])
    func parses(spec: String, host: String, port: Int, device: String?) throws {
        let address = try GPSDAddress(parsing: spec)
        #expect(address == GPSDAddress(host: host, port: UInt16(port), device: device))
        #expect(try GPSDAddress(parsing: address.description) == address, "description parses back")
    }

    @Test func theDefaultIsLocalhost2947() {
        #expect(GPSDAddress.default.description == "localhost:2947")
        #expect(GPSDAddress(host: "::1").description == "[::1]:2947")
        #expect(GPSDAddress(device: "/dev/ttyACM0").description == "localhost:2947:/dev/ttyACM0")
    }

    @Test func refusesBadAddresses() {
        #expect(throws: GPSDAddress.ParseError.badPort("http", spec: "localhost:http")) {
            try GPSDAddress(parsing: "localhost:http")
        }
        #expect(throws: GPSDAddress.ParseError.badPort("0", spec: "localhost:0")) {
            try GPSDAddress(parsing: "localhost:0")
        }
        #expect(throws: GPSDAddress.ParseError.badPort("65536", spec: "localhost:65536")) {
            try GPSDAddress(parsing: "localhost:65536")
        }
        #expect(throws: GPSDAddress.ParseError.badPort("-1", spec: "h:-1")) { try GPSDAddress(parsing: "h:-1") }
        #expect(throws: GPSDAddress.ParseError.unclosedBracket(spec: "[::1:2947")) {
            try GPSDAddress(parsing: "[::1:2947")
        }
        #expect(throws: GPSDAddress.ParseError.unexpectedText("x:1", spec: "[::1]x:1")) {
            try GPSDAddress(parsing: "[::1]x:1")
        }
        #expect(throws: GPSDAddress.ParseError.emptyHost(spec: "[]:2947")) { try GPSDAddress(parsing: "[]:2947") }
        #expect(throws: GPSDAddress.ParseError.badHost("a b", spec: "a b:2947")) {
            try GPSDAddress(parsing: "a b:2947")
        }
        // An IPv6 address without brackets is gpsd's "default host, default port, device 1".
        #expect(throws: GPSDAddress.ParseError.badDevice("1", spec: "::1")) { try GPSDAddress(parsing: "::1") }
        let message = "\(GPSDAddress.ParseError.badPort("http", spec: "localhost:http"))"
        #expect(message == "bad gpsd address \"localhost:http\": port \"http\" is not a number from 1 to 65535")
    }
}

struct ReconnectBackoffTests {
    @Test func ceilingsDoubleFromTheBaseUpToTheCap() {
        let backoff = ReconnectBackoff()
        let ceilings = (0..<10).map { backoff.ceiling(forAttempt: $0) }
        #expect(ceilings == [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30])
        #expect(backoff.ceiling(forAttempt: 10_000) == 30)
        #expect(backoff.ceiling(forAttempt: -3) == 0.5)
    }

    @Test func fullJitterStaysWithinZeroAndTheCeiling() {
        let backoff = ReconnectBackoff(base: 0.5, cap: 30)
        for attempt in 0..<40 {
            for unit in stride(from: 0.0, through: 1.0, by: 0.02) {
                let delay = backoff.delay(forAttempt: attempt, unit: unit)
                #expect(delay >= 0 && delay <= backoff.ceiling(forAttempt: attempt))
            }
        }
        #expect(backoff.delay(forAttempt: 3, unit: 0) == 0)
        #expect(backoff.delay(forAttempt: 3, unit: 1) == 4)
        #expect(backoff.delay(forAttempt: 3, unit: 0.25) == 1)
        #expect(backoff.delay(forAttempt: 3, unit: 7) == 4, "out-of-range randoms are clamped")
        #expect(backoff.delay(forAttempt: 3, unit: .nan) == 4)
    }

    /// The reconciler's schedule (1 s doubling to 5 minutes, equal jitter) and the hooks' other settings.
    @Test func equalJitterNoJitterAndOtherMultipliers() {
        let reconciler = ReconnectBackoff(base: 1, cap: 300, jitter: .equal)
        #expect((0..<10).map { reconciler.ceiling(forAttempt: $0) } == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300])
        #expect(reconciler.ceiling(forAttempt: 10_000) == 300)
        #expect(reconciler.delay(forAttempt: 3, unit: 0) == 4)
        #expect(reconciler.delay(forAttempt: 3, unit: 0.5) == 6)
        #expect(reconciler.delay(forAttempt: 3, unit: 1) == 8)
        let fixed = ReconnectBackoff(base: 1, cap: 10, multiplier: 3, jitter: .none)
        #expect((0..<4).map { fixed.delay(forAttempt: $0, unit: 0.3) } == [1, 3, 9, 10])
        #expect(ReconnectBackoff(multiplier: 0.5).ceiling(forAttempt: 5) == 0.5, "a multiplier below 1 counts as 1")
        #expect(ReconnectBackoff(base: 0).ceiling(forAttempt: 3) == 0)
    }
}

struct CapabilitySnapshotTests {
    let path = "/dev/ttyACM0"

    @Test func learnsWhatADeviceReportsAndItsInterval() {
        let snapshot = Driven(CapabilitySnapshot(devices: [.init(path: path, driver: "u-blox")]))
        let start = Date(timeIntervalSince1970: 1_748_779_200)
        var fix = Fix(subject: path, time: start, mode: .twoD, latitude: 1, longitude: 2)
        #expect(snapshot.learn(from: fix, previousFixTime: nil))
        #expect(snapshot.devices[0].reports == [.time, .position2D])
        #expect(!snapshot.learn(from: fix, previousFixTime: nil), "nothing new")

        fix.time = start.addingTimeInterval(1.000_000_1)
        fix.mode = .threeD
        fix.altitudeHAE = 10
        fix.horizontalAccuracy = 5
        #expect(snapshot.learn(from: fix, previousFixTime: start))
        #expect(snapshot.devices[0].reports == [.time, .position2D, .position3D, .horizontalAccuracy])
        #expect(snapshot.devices[0].observedInterval == 1)
        #expect(snapshot.devices[0].updateInterval == 1)
        fix.time = start.addingTimeInterval(2.000_000_2)
        #expect(!snapshot.learn(from: fix, previousFixTime: start.addingTimeInterval(1)), "noise is not news")
        #expect(
            !snapshot.learn(
                from: Fix(subject: "other", time: nil, mode: .threeD, latitude: 1, longitude: 2),
                previousFixTime: nil))
    }

    @Test func updatesKeepWhatWasLearnedAndRemovalsDrop() {
        let snapshot = Driven(
            CapabilitySnapshot(devices: [.init(path: path, reports: [.speed], observedInterval: 0.5)]))
        #expect(snapshot.update(.init(path: path, driver: "NMEA0183")))
        #expect(snapshot.devices == [.init(path: path, driver: "NMEA0183", reports: [.speed], observedInterval: 0.5)])
        #expect(!snapshot.update(.init(path: path, driver: "NMEA0183")))
        #expect(snapshot.update(.init(path: "/dev/ttyUSB0")))
        #expect(snapshot.devices.count == 2)
        #expect(snapshot.removeDevice(at: path))
        #expect(!snapshot.removeDevice(at: path))
        #expect(snapshot.devices.map(\.path) == ["/dev/ttyUSB0"])
    }
}

struct NMEAGeneratorTests {
    @Test func checksumsMatchRealReceivers() throws {
        // Sentences from the BT-451 and Zeus recordings.
        #expect(NMEAGenerator.hasValidChecksum("$GPRMC,,V,,,,,,,,,,N*53"))
        #expect(NMEAGenerator.hasValidChecksum("$GPGGA,094741,5251.0046,N,00518.8070,E,1,12,0.60,-4,M,46.8,M,,*47\r\n"))
        #expect(!NMEAGenerator.hasValidChecksum("$GPRMC,,V,,,,,,,,,,N*54"))
        #expect(!NMEAGenerator.hasValidChecksum("GPRMC,,V,,,,,,,,,,N*53"))
        #expect(NMEAGenerator.sentence("GPRMC,,V,,,,,,,,,,N") == "$GPRMC,,V,,,,,,,,,,N*53")
        #expect(NMEAGenerator.checksum(of: "GPGSV,1,1,00") == 0x79)
    }

    @Test func everyGeneratedSentenceIsValid() {
        let generator = NMEAGenerator(includeGST: true)
        let track = NMEAGenerator.track(
            from: Coordinate(latitude: -33.8568, longitude: 151.2153),
            at: Date(timeIntervalSince1970: 1_748_779_200),
            course: 200,
            speed: 12,
            count: 5
        )
        let sentences =
            track.flatMap(generator.sentences(for:)) + generator.noFixSentences(at: nil)
            + generator.noFixSentences(at: track[0].time)
        #expect(sentences.count == 5 * 4 + 6)
        for sentence in sentences {
            #expect(NMEAGenerator.hasValidChecksum(sentence), "\(sentence)")
        }
        #expect(sentences[0].hasPrefix("$GPRMC,120000.00,A,3351.408000,S,15112.918000,E,23.326,200.00,010625,,,A*"))
        #expect(sentences[1].hasPrefix("$GPGGA,120000.00,3351.408000,S,15112.918000,E,1,08,0.90,50.00,M,47.00,M,,*"))
        #expect(sentences[3].hasPrefix("$GPGST,120000.00,3.2,3.2,2.0,0.0,2.5,2.0,3.8*"))
        #expect(generator.noFixSentences(at: nil)[0] == "$GPRMC,,V,,,,,,,,,,N*53")
    }

    @Test func fieldsRoundCorrectly() {
        #expect(NMEAGenerator.latitudeFields(51.5) == "5130.000000,N")
        #expect(NMEAGenerator.longitudeFields(-0.1246) == "00007.476000,W")
        #expect(NMEAGenerator.longitudeFields(-179.999_999_999_9) == "18000.000000,W")
        #expect(NMEAGenerator.latitudeFields(9.999_999_999_9) == "1000.000000,N")
        #expect(NMEAGenerator.timeField(Date(timeIntervalSince1970: 1_748_779_200.25)) == "120000.25")
        #expect(NMEAGenerator.dateField(Date(timeIntervalSince1970: 1_748_779_200)) == "010625")
    }
}

struct GPSDMessageClassTests {
    @Test func readsTheFirstClassMember() {
        func jsonClass(_ text: String) -> String {
            let bytes = Array(text.utf8CString)
            return bytes.withUnsafeBufferPointer { GPSDSession.jsonClass(of: $0) }
        }
        #expect(jsonClass(#"{"class":"TPV","device":"/dev/x","mode":3}"#) == "TPV")
        #expect(jsonClass(#"{"class":"DEVICES","devices":[{"class":"DEVICE","path":"/dev/x"}]}"#) == "DEVICES")
        #expect(jsonClass(#"{"mode":3}"#) == "")
        #expect(jsonClass("") == "")
    }
}

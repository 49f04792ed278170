import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceTestSupport
import Testing

/// `GPSDSource` against a real gpsd: crashes, late starts, silence, staleness, devices.
@Suite(.enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
struct GPSDSourceTests {
    static let generator = NMEAGenerator(includeGST: true)
    /// 2025-06-01T12:00:00Z: after 2017, so gpsd applies no 1024-week shift.
    static let start = Date(timeIntervalSince1970: 1_748_779_200)
    static let track = NMEAGenerator.track(
        from: Coordinate(latitude: 51.5007, longitude: -0.1246),
        at: start,
        course: 45,
        speed: 8,
        count: 40
    )

    static func send(_ epochs: ArraySlice<NMEAGenerator.Epoch>, to harness: GPSDHarness) async throws {
        for epoch in epochs {
            try await harness.send(nmea: generator.sentences(for: epoch), pace: .milliseconds(2))
        }
    }

    static func hasSnapshot(_ reports: [GPSDReport], after connections: Int = 1) -> Bool {
        var seen = 0
        for report in reports {
            if report == .connected { seen += 1 }
            if seen >= connections, case .capabilities = report { return true }
        }
        return false
    }

    @Test func decodesWhatTheGeneratorSent() async throws {
        let harness = try await GPSDHarness()
        defer { harness.stop() }
        try await withSource(.init(address: harness.address)) { _, recorder in
            try await recorder.wait(for: "the device list") { Self.hasSnapshot($0) }
            try await Self.send(Self.track[0..<3], to: harness)
            try await recorder.wait(for: "the third epoch") { _ in
                recorder.fixes.contains { $0.time == Self.track[2].time && $0.altitudeMSL != nil }
            }
            let epochs = Recording.lastOfEachEpoch(recorder.fixes.map { ($0.time, $0) })
            #expect(epochs.count == 3)
            for (fix, epoch) in zip(epochs, Self.track) {
                #expect(fix.subject == harness.devicePath)
                #expect(fix.mode == .threeD)
                #expect(abs(fix.latitude! - epoch.latitude) < 1e-7)
                #expect(abs(fix.longitude! - epoch.longitude) < 1e-7)
                #expect(abs(fix.altitudeMSL! - epoch.altitude) < 1e-3)
                #expect(abs(fix.altitudeHAE! - (epoch.altitude + epoch.geoidSeparation)) < 1e-3)
                #expect(abs(fix.speed! - epoch.speed) < 0.01)
                #expect(abs(fix.course! - epoch.course) < 0.01)
                #expect(fix.horizontalAccuracy != nil)
            }
            // What the device has shown it can report, and how often.
            let device = try #require(recorder.snapshots.last?.device(at: harness.devicePath))
            #expect(device.driver == "NMEA0183")
            #expect(device.reports.isSuperset(of: [.time, .position2D, .position3D, .speed, .course]))
            #expect(device.observedInterval == 1)
            #expect(recorder.snapshots.last?.daemon?.release == "3.22")
        }
    }

    @Test func reconnectsAfterGPSDIsKilledAndRestarted() async throws {
        let harness = try await GPSDHarness()
        defer { harness.stop() }
        try await withSource(.init(address: harness.address)) { _, recorder in
            try await recorder.wait(for: "the device list") { Self.hasSnapshot($0) }
            try await Self.send(Self.track[0..<3], to: harness)
            try await recorder.wait(for: "a 3D fix") { _ in recorder.fixes.contains { $0.mode == .threeD } }

            let clock = ContinuousClock()
            let killedAt = clock.now
            harness.kill()
            try await recorder.wait(for: "lost and disconnected") { _ in
                recorder.transitions == [.lost] && recorder.disconnections.contains { $0.cause == .closedByGPSD }
            }
            let drop = try #require(recorder.disconnections.first)
            #expect(drop.attempt == 1)
            #expect(drop.retryIn <= .milliseconds(500), "first retry after a good connection is within the base")

            try await harness.start()  // same ports
            try await recorder.wait(for: "a second connection and device list") { Self.hasSnapshot($0, after: 2) }
            let reconnected = clock.now - killedAt
            #expect(reconnected < .seconds(5), "reconnected after \(reconnected)")

            try await Self.send(Self.track[3..<6], to: harness)
            try await recorder.wait(for: "restored and new fixes") { _ in
                recorder.transitions == [.lost, .restored]
                    && recorder.fixes.contains { $0.time == Self.track[5].time }
            }
            // Exactly one lost and one restored, in that order, and the restore came with a fix.
            let reports = recorder.reports
            let restoredIndex = try #require(reports.firstIndex(of: .liveness(.restored)))
            #expect(
                reports[(restoredIndex + 1)...].contains { if case .fix = $0 { return true } else { return false } })
        }
    }

    @Test func keepsRetryingUntilGPSDStartsThenStartsTheBackoffOver() async throws {
        let harness = try await GPSDHarness(start: false)
        defer { harness.stop() }
        let configuration = GPSDSource.Configuration(
            address: harness.address,
            backoff: ReconnectBackoff(base: 0.1, cap: 0.4),
            healthyConnectionDuration: 0.3
        )
        // The largest delay every time, so the schedule is exact: 0.1, 0.2, 0.4, 0.4, … s.
        let alwaysOne: @Sendable () -> Double = { 1 }
        try await withSource(configuration, random: alwaysOne) { _, recorder in
            try await recorder.wait(for: "four failed attempts") { _ in recorder.disconnections.count >= 4 }
            let failures = recorder.disconnections
            #expect(recorder.connectionCount == 0)
            #expect(failures.map(\.attempt).prefix(4) == [1, 2, 3, 4])
            #expect(
                failures.map(\.retryIn).prefix(4) == [
                    .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(400),
                ])
            for failure in failures {
                #expect(failure.cause == .unreachable("connection refused"))
            }
            #expect(
                failures[0].description
                    == "gpsd is not reachable at 127.0.0.1:\(harness.port) (connection refused): "
                    + "is it running? sudo systemctl start gpsd"
            )

            try await harness.start()
            try await recorder.wait(for: "the connection once gpsd runs", timeout: .seconds(5)) {
                Self.hasSnapshot($0)
            }
            #expect(recorder.snapshots.last?.devices.map(\.path) == [harness.devicePath])

            // A connection that lasted longer than healthyConnectionDuration resets the backoff.
            // The connection must last a time (healthyConnectionDuration): time is the condition itself.
            try await Task.sleep(for: .milliseconds(500))
            let before = recorder.disconnections.count
            harness.kill()
            try await recorder.wait(for: "the drop") { _ in recorder.disconnections.count > before }
            let drop = recorder.disconnections[before]
            #expect(drop.cause == .closedByGPSD)
            #expect(drop.attempt == 1)
            #expect(drop.retryIn == .milliseconds(100))
        }
    }

    /// A receiver that sends only no-fix sentences, or nothing at all, is `silent` at the deadline.
    @Test(arguments: [true, false])
    func reportsSilentAtTheFirstFixDeadline(sendsNoFixSentences: Bool) async throws {
        let harness = try await GPSDHarness()
        defer { harness.stop() }
        let configuration = GPSDSource.Configuration(
            address: harness.address,
            liveness: SourceLiveness.Configuration(firstFixDeadline: 2, stalenessLimit: 10)
        )
        let clock = ContinuousClock()
        let started = clock.now
        try await withSource(configuration) { _, recorder in
            try await recorder.wait(for: "the device list") { Self.hasSnapshot($0) }
            let feeder = Task {
                var time = Self.start
                while !Task.isCancelled, sendsNoFixSentences {
                    try? await harness.send(nmea: Self.generator.noFixSentences(at: time), pace: .zero)
                    time.addTimeInterval(1)
                    // The receiver's pace, not a wait.
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
            defer { feeder.cancel() }
            try await recorder.wait(for: "silent", timeout: .seconds(8)) { _ in recorder.transitions == [.silent] }
            // Never before the deadline; the upper bound is generous for a busy, shared machine.
            let elapsed = clock.now - started
            #expect(elapsed >= .seconds(1.9) && elapsed < .seconds(6), "silent after \(elapsed)")
            // Shows that something does not happen (a second report): only time shows it.
            try await Task.sleep(for: .milliseconds(300))
            #expect(recorder.transitions == [.silent], "reported once")
            #expect(recorder.fixes.allSatisfy { $0.mode < .twoD })
            if sendsNoFixSentences { #expect(!recorder.fixes.isEmpty, "no-fix TPVs still arrive") }
        }
    }

    @Test func reportsLostWhenFixesStopAndRestoredWhenTheyReturn() async throws {
        let harness = try await GPSDHarness()
        defer { harness.stop() }
        let configuration = GPSDSource.Configuration(
            address: harness.address,
            liveness: SourceLiveness.Configuration(firstFixDeadline: 30, stalenessLimit: 1)
        )
        try await withSource(configuration) { _, recorder in
            try await recorder.wait(for: "the device list") { Self.hasSnapshot($0) }
            try await Self.send(Self.track[0..<2], to: harness)
            try await recorder.wait(for: "lost", timeout: .seconds(4)) { _ in recorder.transitions == [.lost] }
            #expect(recorder.disconnections.isEmpty, "still connected: the data stopped, not gpsd")
            try await Self.send(Self.track[2..<3], to: harness)
            try await recorder.wait(for: "restored") { _ in recorder.transitions == [.lost, .restored] }
        }
    }

    @Test func sendsANewSnapshotWhenADeviceIsAddedOrRemoved() async throws {
        let harness = try await GPSDHarness()
        defer { harness.stop() }
        let other = try await GPSDHarness(start: false)  // only for a free UDP port
        let extra = other.devicePath
        try await withSource(.init(address: harness.address)) { _, recorder in
            try await recorder.wait(for: "the device list") { Self.hasSnapshot($0) }
            try harness.addDevice(extra)
            try await recorder.wait(for: "two devices") { _ in
                recorder.snapshots.last?.devices.map(\.path) == [harness.devicePath, extra]
            }
            try harness.removeDevice(harness.devicePath)
            try await recorder.wait(for: "the first device removed") { _ in
                recorder.snapshots.last?.devices.map(\.path) == [extra]
            }
        }
    }

    @Test func stopReturnsPromptlyAndEndsTheStream() async throws {
        let harness = try await GPSDHarness(start: false)  // nothing listens: the source is in backoff
        defer { harness.stop() }
        let source = GPSDSource(configuration: .init(address: harness.address))
        source.start()
        let recorder = ReportRecorder(source)
        try await recorder.wait(for: "a failed attempt") { _ in !recorder.disconnections.isEmpty }
        let clock = ContinuousClock()
        let elapsed = await clock.measure { await source.stop() }
        #expect(elapsed < .seconds(1))
        var iterator = source.reports.makeAsyncIterator()
        _ = await iterator.next()  // drains at most what was buffered
    }
}

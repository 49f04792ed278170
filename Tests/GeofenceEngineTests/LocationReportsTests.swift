import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

@Suite("location reports") struct LocationReportsTests {
    static let fix = Fix(
        subject: "v", time: Date(timeIntervalSince1970: 1_795_000_000), mode: .threeD, latitude: 48, longitude: 2,
        horizontalAccuracy: 5)

    @Test("a report the consumer took is not kept alive by the sequence (a batch holds hundreds of fixes)")
    func takenReportsAreReleased() async {
        let reports = LocationReports(backPressure: .unbounded)
        for _ in 0..<100 { reports.sendNow(.fixes(Array(repeating: Self.fix, count: 512))) }
        var iterator = reports.makeAsyncIterator()
        for _ in 0..<50 { _ = await iterator.next() }
        #expect(reports.pending == 50)
        #expect(reports.retained == 50, "taken reports were still held")
        for _ in 0..<50 { _ = await iterator.next() }
        #expect(reports.retained == 0)
    }

    @Test("a producer waits at the high watermark until the consumer took the reports down to the low one")
    func backPressureByWatermarks() async throws {
        let reports = LocationReports(backPressure: LocationReports.BackPressure(high: 4, low: 1))
        let sent = Atomic(0)
        let producer = Thread {
            for _ in 0..<10 {
                reports.send(.fix(Self.fix))
                sent.add(1, ordering: .relaxed)
            }
            reports.finish()
        }
        producer.start()
        // Shows that something does not happen (the fourth send does not return): no signal, only time.
        try await Task.sleep(for: .milliseconds(200))
        #expect(sent.load(ordering: .relaxed) == 3, "the fourth send waits (it is in the buffer, not returned)")
        #expect(reports.pending == 4)
        var iterator = reports.makeAsyncIterator()
        for _ in 0..<2 { _ = await iterator.next() }
        // Again something that does not happen (the producer goes on waiting): only time shows it.
        try await Task.sleep(for: .milliseconds(100))
        #expect(sent.load(ordering: .relaxed) == 3, "above the low watermark the producer still waits")
        _ = await iterator.next()
        var taken = 3
        while await iterator.next() != nil { taken += 1 }
        #expect(taken == 10 && sent.load(ordering: .relaxed) == 10)
    }

    @Test("cancelling the consumer ends its iteration; finish ends it after what is buffered")
    func cancellationAndFinish() async {
        let reports = LocationReports()
        let taken = Atomic(0)
        let consumer = Task {
            var n = 0
            for await _ in reports {
                n += 1
                taken.store(n, ordering: .relaxed)
            }
            return n
        }
        reports.sendNow(.up)
        _ = await Wait.until(timeout: 10, every: .milliseconds(5)) { taken.load(ordering: .relaxed) >= 1 }
        consumer.cancel()
        #expect(await consumer.value == 1)

        let other = LocationReports()
        other.sendNow(.up)
        other.sendNow(.fix(Self.fix))
        other.finish()
        #expect(other.sendNow(.up) == false, "nothing is taken after the end")
        var n = 0
        for await _ in other { n += 1 }
        #expect(n == 2)
    }
}

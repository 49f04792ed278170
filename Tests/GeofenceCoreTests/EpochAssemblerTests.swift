import Foundation
import GeofenceCore
import Testing

@Suite("EpochAssembler")
struct EpochAssemblerTests {
    private let t0 = Date(timeIntervalSince1970: 1_795_000_000)

    private func tpv(_ second: Double, accuracy: Double?, mode: FixMode = .threeD, subject: String = "gps") -> Fix {
        Fix(
            subject: subject, time: t0.addingTimeInterval(second), mode: mode, latitude: 52, longitude: 5,
            horizontalAccuracy: accuracy)
    }

    @Test("an incomplete report waits for the better one of its epoch, which goes on at once")
    func waitsForCompleteReport() {
        var a = EpochAssembler(settle: 0.3)
        let rmc = tpv(0, accuracy: nil)
        let gga = tpv(0, accuracy: 9.5)
        #expect(a.offer(rmc, now: 0).isEmpty)
        #expect(a.offer(gga, now: 0.05) == [.superseded(rmc), .ready(gga)])
        // A third report of the same epoch goes on too: the filter refuses it as a duplicate.
        let gsa = tpv(0, accuracy: 9.5)
        #expect(a.offer(gsa, now: 0.06) == [.ready(gsa)])
    }

    @Test("an incomplete report goes on when the next epoch begins, or after settling")
    func settles() {
        var a = EpochAssembler(settle: 0.3)
        let first = tpv(0, accuracy: nil)
        #expect(a.offer(first, now: 0).isEmpty)
        #expect(a.due(now: 0.2).isEmpty)
        #expect(a.due(now: 0.31) == [first])
        #expect(a.due(now: 1).isEmpty, "once only")

        let second = tpv(1, accuracy: nil)
        let third = tpv(2, accuracy: 4)
        #expect(a.offer(second, now: 1).isEmpty)
        #expect(a.offer(third, now: 1.1) == [.ready(second), .ready(third)])
    }

    @Test("reports without time and other subjects pass straight through or apart")
    func passThrough() {
        var a = EpochAssembler()
        var timeless = tpv(0, accuracy: 5)
        timeless.time = nil
        #expect(a.offer(timeless, now: 0) == [.ready(timeless)])
        let x = tpv(0, accuracy: nil, subject: "x")
        let y = tpv(0, accuracy: 3, subject: "y")
        #expect(a.offer(x, now: 0).isEmpty)
        #expect(a.offer(y, now: 0) == [.ready(y)])
        #expect(a.flush() == [x])
    }
}

import Foundation
import GeofenceCore
import Testing

/// `Fix` keeps its optional numbers as plain `Double`s, absent as a NaN of its own: what a caller sets is what
/// it reads back, nil stays nil, a NaN stays a NaN (and is refused by the filter as a bad value, not taken
/// for a missing one), and equality is field by field as for optionals.
@Suite("Fix storage")
struct FixStorageTests {
    private typealias Field = WritableKeyPath<Fix, Double?>
    private static var fields: [(String, Field)] {
        [
            ("latitude", \.latitude), ("longitude", \.longitude), ("altitudeHAE", \.altitudeHAE),
            ("altitudeMSL", \.altitudeMSL), ("horizontalAccuracy", \.horizontalAccuracy),
            ("verticalAccuracy", \.verticalAccuracy), ("speed", \.speed), ("course", \.course),
        ]
    }

    private func blank() -> Fix {
        Fix(subject: "v", time: nil, mode: .threeD, latitude: nil, longitude: nil)
    }

    @Test("every number reads back as set: nil, zero, signed zero, extremes, infinities, NaN")
    func roundTrip() {
        let values: [Double?] = [
            nil, 0, -0.0, 1e-300, -1e300, .greatestFiniteMagnitude, .leastNonzeroMagnitude, .infinity, -.infinity,
            52.123_456_7, -180,
        ]
        for (name, field) in Self.fields {
            for value in values {
                var fix = blank()
                fix[keyPath: field] = value
                let read = fix[keyPath: field]
                #expect(read == value, "\(name) = \(String(describing: value))")
                #expect(read?.sign == value?.sign, "\(name) = \(String(describing: value))")
                // The others stay absent.
                for (other, otherField) in Self.fields where other != name {
                    #expect(fix[keyPath: otherField] == nil, "\(other) after setting \(name)")
                }
            }
            var fix = blank()
            fix[keyPath: field] = .nan
            #expect(fix[keyPath: field]?.isNaN == true, "\(name) = nan reads back as nan, not nil")
            fix[keyPath: field] = nil
            #expect(fix[keyPath: field] == nil, "\(name) set back to nil")
        }
    }

    @Test("times read back as set, to the bit, and nil stays nil")
    func times() {
        let dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.123_456),
            Date(timeIntervalSinceReferenceDate: -1e12), Date.distantFuture, Date.distantPast,
        ]
        for date in dates {
            var fix = blank()
            fix.time = date
            fix.receivedAt = date.addingTimeInterval(0.5)
            #expect(fix.time == date)
            #expect(
                fix.time?.timeIntervalSinceReferenceDate.bitPattern == date.timeIntervalSinceReferenceDate.bitPattern)
            #expect(fix.receivedAt == date.addingTimeInterval(0.5))
            fix.time = nil
            #expect(fix.time == nil && fix.receivedAt != nil)
        }
    }

    @Test("equality is field by field, absent equal to absent, NaN equal to nothing")
    func equality() {
        let a = Fix(
            subject: "v", time: Date(timeIntervalSince1970: 1), mode: .twoD, latitude: 1, longitude: 2, speed: 3)
        var b = a
        #expect(a == b)
        b.course = 0
        #expect(a != b, "an absent course differs from a course of 0")
        b.course = nil
        #expect(a == b)
        b.subject = "w"
        #expect(a != b)
        b = a
        b.receivedAt = Date(timeIntervalSince1970: 1)
        #expect(a != b)
        var c = a
        c.altitudeMSL = .nan
        #expect(c != c, "a NaN field equals nothing, as `Double?` does")
    }

    @Test("a NaN position is refused as a bad position, an absent one as no position")
    func nanIsNotAbsent() {
        var filter = FixFilter()
        var fix = Fix(
            subject: "v", time: Date(timeIntervalSince1970: 1_795_000_000), mode: .threeD, latitude: .nan,
            longitude: 5)
        #expect(filter.evaluate(fix) == .rejected(.invalidCoordinates))
        #expect(FixFilter.classify(fix, now: nil, configuration: FixFilterConfiguration()) == .badPosition)
        fix.latitude = nil
        #expect(FixFilter.classify(fix, now: nil, configuration: FixFilterConfiguration()) == .noPosition)
    }
}

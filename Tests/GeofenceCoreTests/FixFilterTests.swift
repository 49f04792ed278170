import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

private let t0 = Date(timeIntervalSince1970: 1_795_000_000)
private let here = Coordinate(latitude: 52.85, longitude: 5.31)

private func fix(
    _ seconds: Double, _ c: Coordinate = here, mode: FixMode = .threeD, accuracy: Double? = 5,
    received: Double? = nil, subject: String = "/dev/gps0"
) -> Fix {
    Fix(
        subject: subject, time: t0.addingTimeInterval(seconds), receivedAt: received.map { t0.addingTimeInterval($0) },
        mode: mode, latitude: c.latitude, longitude: c.longitude, horizontalAccuracy: accuracy)
}

private func reason(_ verdict: FixVerdict) -> FixRejection? {
    if case .rejected(let r) = verdict { return r }
    return nil
}

@Suite("FixFilter")
struct FixFilterTests {
    @Test("every rejection reason is produced and counted")
    func reasons() {
        var filter = FixFilter()
        #expect(reason(filter.evaluate(fix(0, mode: .noFix))) == .noFix)
        var noTime = fix(0)
        noTime.time = nil
        #expect(reason(filter.evaluate(noTime)) == .noTime)
        var nanLat = fix(0)
        nanLat.latitude = .nan
        #expect(reason(filter.evaluate(nanLat)) == .invalidCoordinates)
        var missing = fix(0)
        missing.longitude = nil
        #expect(reason(filter.evaluate(missing)) == .invalidCoordinates)
        #expect(reason(filter.evaluate(fix(0, Coordinate(latitude: 91, longitude: 0)))) == .invalidCoordinates)
        #expect(reason(filter.evaluate(fix(0, Coordinate(latitude: 0, longitude: 0)))) == .nullIsland)
        #expect(reason(filter.evaluate(fix(100, received: 90))) == .future)
        #expect(reason(filter.evaluate(fix(0, received: 31))) == .stale)
        // Only a fix nothing can be learnt from is refused for accuracy: kilometres, not a city's 150 m.
        #expect(reason(filter.evaluate(fix(0, accuracy: 6000))) == .tooInaccurate)
        #expect(reason(filter.evaluate(fix(0))) == nil)
        #expect(reason(filter.evaluate(fix(0))) == .duplicate)
        #expect(reason(filter.evaluate(fix(-1))) == .outOfOrder)
        #expect(reason(filter.evaluate(fix(1, offset(here, north: 5000, east: 0)))) == .implausibleJump)
        let s = filter.statistics
        #expect(s.accepted == 1)
        for r in FixRejection.allCases { #expect(s[r] == (r == .invalidCoordinates ? 3 : 1), "\(r)") }
        #expect(s.total == 1 + FixRejection.allCases.count + 2)
    }

    /// One judge for every source: the filter's refusal of a fix on its own is `classify`'s, and a fleet's
    /// fix (judged at its receipt time, not carrying it) has the same future limit and no age limit.
    @Test("classify is the filter's judgement of a fix on its own, for live and fleet fixes alike")
    func classifyIsTheFiltersJudgement() {
        let filter = FixFilter()
        var noTime = fix(0)
        noTime.time = nil
        var missing = fix(0)
        missing.longitude = nil
        let cases: [(Fix, FixClass)] = [
            (fix(0, mode: .noFix), .noFix(.noFix)), (noTime, .noTime), (missing, .noPosition),
            (fix(0, Coordinate(latitude: 91, longitude: 0)), .badPosition),
            (fix(0, Coordinate(latitude: 0, longitude: 0)), .nullIsland), (fix(100, received: 90), .future(lead: 10)),
            (fix(0, received: 31), .stale(age: 31)), (fix(0, received: 1), .usable(time: t0, coordinate: here)),
        ]
        for (input, expected) in cases {
            #expect(filter.classify(input, now: input.receivedAt) == expected, "\(input)")
            var judge = FixFilter()
            if let rejection = expected.rejection {
                #expect(judge.evaluate(input) == .rejected(rejection), "\(input)")
            } else {
                #expect(judge.evaluate(input) != .rejected(.future))
            }
        }
        // A fleet's fix: the same future limit (5 s, not a limit of its own), and no age limit.
        let received = t0
        #expect(filter.classify(fix(59), now: received) == .future(lead: 59))
        #expect(filter.classify(fix(6), now: received) == .future(lead: 6))
        #expect(filter.classify(fix(5), now: received).isUsable)
        #expect(filter.classify(fix(-3600), now: received).isUsable, "a fleet's backlog is rightly old")
        // One setting moves the limit for every source.
        var wide = FixFilterConfiguration()
        wide.maxFutureSkew = 120
        #expect(FixFilter.classify(fix(59), now: received, configuration: wide).isUsable)
        #expect(FixFilter(configuration: wide).classify(fix(59, received: 0), now: t0).isUsable)
    }

    @Test("missing accuracy uses the default and marks it estimated")
    func estimatedAccuracy() {
        var filter = FixFilter()
        guard case .accepted(let w) = filter.evaluate(fix(0, accuracy: nil)) else {
            Issue.record("refused")
            return
        }
        #expect(w.accuracyEstimated)
        #expect(w.accuracy == FixFilterConfiguration().defaultAccuracy)
    }

    @Test("a single jump is refused, a consistent run of them becomes the new truth")
    func resync() {
        var filter = FixFilter()
        #expect(reason(filter.evaluate(fix(0))) == nil)
        let away = offset(here, north: 20_000, east: 0)
        #expect(reason(filter.evaluate(fix(1, away))) == .implausibleJump)
        #expect(reason(filter.evaluate(fix(2, here))) == nil, "back to normal: the jump was an outlier")
        #expect(reason(filter.evaluate(fix(3, away))) == .implausibleJump)
        #expect(reason(filter.evaluate(fix(4, offset(away, north: 10, east: 0)))) == .implausibleJump)
        #expect(reason(filter.evaluate(fix(5, offset(away, north: 20, east: 0)))) == nil)
        #expect(filter.statistics.resynchronized == 1)
        #expect(reason(filter.evaluate(fix(6, offset(away, north: 30, east: 0)))) == nil)
    }

    @Test("a clock that stepped back is followed after a consistent run")
    func clockStepBack() {
        var filter = FixFilter()
        #expect(reason(filter.evaluate(fix(86_400))) == nil)
        #expect(reason(filter.evaluate(fix(1))) == .outOfOrder)
        #expect(reason(filter.evaluate(fix(1))) == .duplicate)
        #expect(reason(filter.evaluate(fix(2))) == .outOfOrder)
        #expect(reason(filter.evaluate(fix(3))) == nil)
        #expect(reason(filter.evaluate(fix(4))) == nil)
    }

    @Test("subjects are filtered independently")
    func perSubject() {
        var filter = FixFilter()
        #expect(reason(filter.evaluate(fix(0, subject: "a"))) == nil)
        #expect(reason(filter.evaluate(fix(0, subject: "b"))) == nil)
        #expect(reason(filter.evaluate(fix(0, subject: "a"))) == .duplicate)
    }
}

@Suite("LocationBudget")
struct LocationBudgetTests {
    private func weighted(_ accuracy: Double, at seconds: Double = 0) -> WeightedFix {
        let f = fix(seconds, accuracy: accuracy)
        return WeightedFix(fix: f, time: f.time!, coordinate: here, accuracy: accuracy, accuracyEstimated: false)
    }

    @Test("the first fix meeting the target wins")
    func met() {
        var budget = LocationBudget(targetAccuracy: 10, timeout: 30, maxAge: 5, start: 100)
        #expect(budget.offer(weighted(40), now: 101) == nil)
        #expect(budget.offer(weighted(8), now: 102) == .met(weighted(8)))
    }

    @Test("at the deadline the best fix so far is coarse")
    func coarse() {
        var budget = LocationBudget(targetAccuracy: 10, timeout: 30, maxAge: 5, start: 100)
        budget.offer(weighted(40), now: 101)
        budget.offer(weighted(25), now: 102)
        budget.offer(weighted(60), now: 103)
        #expect(budget.expire(now: 129) == nil)
        #expect(budget.expire(now: 130) == .coarse(weighted(25)))
    }

    @Test("no usable fix at all is silent")
    func silent() {
        var budget = LocationBudget(targetAccuracy: 10, timeout: 2, maxAge: 5, start: 0)
        #expect(budget.expire(now: 2) == .silent)
    }
}

import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// The hints `FixPipeline` keeps for each vehicle (its slots in the epoch assembler, the filter and the monitor)
/// make a look-up cheaper, never wrong: given the right slot, another vehicle's, one past the end or a
/// removed vehicle's, each part gives exactly what it gives without a hint.
@Suite("track hints")
struct TrackHintTests {
    private let depot = Coordinate(latitude: 45.76, longitude: 4.84)
    private let start = Date(timeIntervalSince1970: 1_800_000_000)
    private let now = Date(timeIntervalSince1970: 1_800_000_000)
    private static let subjects = ["van-a", "van-b", "van-c", "van-d", "van-e", "van-f"]

    /// Regions in a row north of the depot: vehicles driving north go in and out of them.
    private func monitor() throws -> RegionMonitor {
        var monitor = RegionMonitor()
        for k in 0..<8 {
            let center = offset(depot, north: Double(k) * 150, east: 0)
            monitor.insert(try Region(id: "r\(k)", center: center, radius: 60), seq: Int64(k + 1))
        }
        return monitor
    }

    /// Vehicle `v`'s fix at second `s`: each drives north at its own speed, a little to the side of the others.
    private func fix(_ v: Int, _ s: Int, accuracy: Double? = 5) -> Fix {
        let p = offset(depot, north: Double(s) * Double(6 + v * 2), east: Double(v) * 7)
        return Fix(
            subject: Self.subjects[v], time: start.addingTimeInterval(Double(s)), mode: .threeD,
            latitude: p.latitude, longitude: p.longitude, horizontalAccuracy: accuracy)
    }

    /// What an output says, event ids aside (two monitors draw them from their own generators).
    private func summary(_ out: MonitorOutput) -> String {
        let events = out.events.map {
            "\($0.type) \($0.region) \($0.subject ?? "-") \(String(describing: $0.state)) \($0.inferred)"
        }
        return "\(events) \(out.pairUpdates) \(String(describing: out.subjectUpdate)) \(out.statusChanges)"
    }

    /// A hint as a careless caller might give it: the right one, another vehicle's, nothing, or past the end.
    private func scrambled(_ right: Int, _ others: [Int], using rng: inout SeededGenerator) -> Int {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: right
        case 1: others.randomElement(using: &rng) ?? right
        case 2: -1
        default: Int.random(in: 50...1_000_000, using: &rng)
        }
    }

    @Test("stale, wrong and missing hints give the filter's and the monitor's own answers, vehicle by vehicle")
    func scrambledHintsChangeNothing() throws {
        var plainMonitor = try monitor()
        var plainFilter = FixFilter()
        var hintedMonitor = try monitor()
        var hintedFilter = FixFilter()
        var filterHints = Array(repeating: -1, count: Self.subjects.count)
        var trackHints = Array(repeating: -1, count: Self.subjects.count)
        var rng = SeededGenerator(seed: 29)
        var wrongHints = 0
        var outputs = 0
        for s in 0..<90 {
            if s == 40 {
                // Vehicles leave both (the monitor moves its last track into each freed place): every hint
                // kept for them, and for the vehicles that moved, is stale now.
                for gone in ["van-b", "van-a"] {
                    plainMonitor.forget(subjects: [gone])
                    plainFilter.forget([gone])
                    hintedMonitor.forget(subjects: [gone])
                    hintedFilter.forget([gone])
                }
            }
            for v in Self.subjects.indices {
                let fix = fix(v, s)
                let plainVerdict = plainFilter.evaluate(fix)
                var filterHint = scrambled(filterHints[v], filterHints, using: &rng)
                let hintedVerdict = hintedFilter.evaluate(fix, hint: &filterHint)
                #expect(hintedVerdict == plainVerdict)
                #expect(hintedFilter.memory(of: fix.subject) == plainFilter.memory(of: fix.subject))
                filterHints[v] = filterHint
                guard case .accepted(let weighted) = plainVerdict else { continue }

                let right = hintedMonitor.track(of: fix.subject, hint: -1)
                let hint = scrambled(trackHints[v], trackHints, using: &rng)
                if hint != right { wrongHints += 1 }
                #expect(hintedMonitor.track(of: fix.subject, hint: hint) == right)
                let plain = plainMonitor.process(weighted, now: now)
                let hinted = hintedMonitor.process(weighted, now: now, track: hint)
                #expect(summary(hinted) == summary(plain), "\(fix.subject) at \(s) s")
                if !plain.events.isEmpty { outputs += 1 }
                trackHints[v] = hintedMonitor.track(of: fix.subject, hint: -1) ?? -1
            }
        }
        for subject in Self.subjects {
            #expect(hintedMonitor.vehicleState(of: subject) == plainMonitor.vehicleState(of: subject))
        }
        #expect(wrongHints > 100, "the wrong hints were tried")
        #expect(outputs > 20, "the vehicles went in and out of regions")
    }

    @Test("a hint finds its vehicle only while the slot is the vehicle's: removed vehicles, moved ones")
    func removedAndMovedVehicles() throws {
        var monitor = try monitor()
        var filter = FixFilter()
        for v in 0..<3 {
            guard case .accepted(let weighted) = filter.evaluate(fix(v, 0)) else {
                Issue.record("refused")
                return
            }
            _ = monitor.process(weighted, now: now)
        }
        let a = try #require(monitor.track(of: "van-a", hint: -1))
        let c = try #require(monitor.track(of: "van-c", hint: -1))
        #expect(monitor.track(of: "van-b", hint: a) == monitor.track(of: "van-b", hint: -1))
        #expect(monitor.track(of: "van-b", hint: a) != a)
        // van-a leaves: van-c moves into its place; van-a's old hint now points at van-c.
        monitor.forget(subjects: ["van-a"])
        #expect(monitor.track(of: "van-a", hint: a) == nil)
        #expect(monitor.track(of: "van-c", hint: c) == a)
        #expect(monitor.track(of: "van-c", hint: a) == a)
        #expect(monitor.track(of: "van-x", hint: 0) == nil)

        var filterHint = -1
        _ = filter.evaluate(fix(0, 1), hint: &filterHint)
        let slotOfA = filterHint
        filter.restore(nil, subject: "van-a")
        #expect(filter.memory(of: "van-a") == nil)
        // van-a comes back as new (its first fix accepted whatever its time), wherever the hint points.
        var stale = slotOfA
        let verdict = filter.evaluate(fix(0, 0), hint: &stale)
        #expect(verdict.isAccepted, "\(verdict)")
        #expect(filter.memory(of: "van-a")?.last?.time == start)
        #expect(filter.memory(of: "van-b")?.last?.time == start, "van-b's track untouched")
    }

    @Test("a checkpoint restored into fresh parts: the old hints are stale there and change nothing")
    func checkpointRestore() throws {
        var monitor = try monitor()
        var filter = FixFilter()
        var filterHints = Array(repeating: -1, count: Self.subjects.count)
        var trackHints = Array(repeating: -1, count: Self.subjects.count)
        func feed(_ monitor: inout RegionMonitor, _ filter: inout FixFilter, _ s: Int, hinted: Bool) -> [String] {
            var summaries: [String] = []
            for v in Self.subjects.indices.reversed() {
                var hint = hinted ? filterHints[v] : -1
                guard case .accepted(let weighted) = filter.evaluate(fix(v, s), hint: &hint) else { continue }
                if hinted { filterHints[v] = hint }
                summaries.append(summary(monitor.process(weighted, now: now, track: hinted ? trackHints[v] : -1)))
                if hinted { trackHints[v] = monitor.track(of: Self.subjects[v], hint: -1) ?? -1 }
            }
            return summaries
        }
        for s in 0..<30 { _ = feed(&monitor, &filter, s, hinted: true) }
        let checkpoint = PartitionCheckpoint(fixSequence: 30, monitor: monitor, filter: filter)
        var restoredMonitor = try self.monitor()
        var restoredFilter = FixFilter()
        try checkpoint.restore(into: &restoredMonitor, filter: &restoredFilter)
        // The restore orders vehicles by name, the original by first fix (reversed here): other slots.
        #expect(restoredMonitor.track(of: "van-a", hint: -1) != monitor.track(of: "van-a", hint: -1))
        var events = 0
        for s in 30..<80 {
            let original = feed(&monitor, &filter, s, hinted: false)
            let restored = feed(&restoredMonitor, &restoredFilter, s, hinted: true)
            #expect(restored == original, "at \(s) s")
            events += original.filter { !$0.hasPrefix("[]") }.count
        }
        #expect(events > 5)
    }

    @Test("the epoch assembler's fast path, with any hint, does what offering the report does")
    func assemblerFastPath() {
        var plain = EpochAssembler(settle: 0.3)
        var fast = EpochAssembler(settle: 0.3)
        var hints = Array(repeating: -1, count: Self.subjects.count)
        var rng = SeededGenerator(seed: 7)
        var taken = 0
        for s in 0..<60 {
            for v in Self.subjects.indices {
                // Now and then an incomplete report (no accuracy) that waits, or a second report of the epoch.
                let incomplete = Int.random(in: 0..<10, using: &rng) == 0
                let fix = fix(v, s, accuracy: incomplete ? nil : 5)
                let repeats = Int.random(in: 0..<8, using: &rng) == 0 ? 2 : 1
                for _ in 0..<repeats {
                    let expected = plain.offer(fix, now: Double(s))
                    var hint = scrambled(hints[v], hints, using: &rng)
                    let got: [EpochAssembler.Outcome]
                    if fast.passesOn(fix, hint: &hint) {
                        got = [.ready(fix)]
                        taken += 1
                        hints[v] = hint
                    } else {
                        got = fast.offer(fix, now: Double(s))
                    }
                    #expect(got == expected, "\(fix.subject) at \(s) s")
                    #expect(fast.passedTime(of: fix.subject) == plain.passedTime(of: fix.subject))
                }
            }
            // Reports of one time come out in the order of a dictionary of the held ones: by subject here.
            let bySubject = { (a: Fix, b: Fix) in a.subject < b.subject }
            #expect(
                fast.due(now: Double(s) + 0.5).sorted(by: bySubject)
                    == plain.due(now: Double(s) + 0.5).sorted(by: bySubject))
        }
        #expect(taken > 200, "most reports took the fast path")
    }
}

extension FixVerdict {
    fileprivate var isAccepted: Bool {
        if case .accepted = self { return true }
        return false
    }
}

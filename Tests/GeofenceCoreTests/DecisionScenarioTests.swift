import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// What the rule reports on the scenarios of `DecisionScenarios` (each placed for a reason written there):
/// every real crossing, once, in order, and nothing else.
@Suite("Decision scenarios")
struct DecisionScenarioTests {
    /// Runs a scenario through a fresh filter and monitor; all events, and the filter and monitor after.
    private func run(_ scenario: DecisionScenario) -> (events: [RegionEvent], filter: FixFilter, monitor: RegionMonitor)
    {
        var filter = FixFilter()
        var monitor = RegionMonitor()
        for (i, region) in scenario.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
        var events: [RegionEvent] = []
        for fix in scenario.fixes {
            guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
            events += monitor.process(weighted, now: DecisionScenarios.start).events
        }
        return (events, filter, monitor)
    }

    private func crossings(_ events: [RegionEvent], _ region: String) -> [RegionEventType] {
        events.filter { $0.region == region && ($0.type == .enter || $0.type == .exit) }.map(\.type)
    }

    @Test("motorway: one fix inside a 28 m region at 28 m/s gives enter then exit")
    func motorwayPass() throws {
        let scenario = DecisionScenarios.motorway(passes: 1)
        let (events, _, monitor) = run(scenario)
        #expect(crossings(events, "gate-0") == [.enter, .exit])
        let enter = try #require(events.first { $0.type == .enter })
        // The enter is the fix on the centre, at once: no second fix was waited for.
        #expect(try #require(enter.distance) <= 12)
        let exit = try #require(events.first { $0.type == .exit })
        #expect(exit.time.timeIntervalSince(enter.time) == 2, "the exit is the fix two seconds on, 56 m out")
        #expect(monitor.outliers == 0)
    }

    @Test("motorway: ten passes in a row are all reported; regions 90 m beside the road give nothing")
    func motorwayPasses() {
        let on = DecisionScenarios.motorway(passes: 10)
        let (events, _, _) = run(on)
        for region in on.regions { #expect(crossings(events, region.id) == [.enter, .exit], "\(region.id)") }
        let beside = DecisionScenarios.motorway(passes: 10, beside: true)
        let (besideEvents, _, _) = run(beside)
        #expect(besideEvents.filter { $0.type != .determined }.isEmpty)
        #expect(besideEvents.allSatisfy { $0.state == .outside })
    }

    @Test("city drive with eph 100-350 m over stretches: every clear crossing once, in order; no fix refused")
    func cityDrive() throws {
        let scenario = DecisionScenarios.cityDrive()
        let (events, filter, _) = run(scenario)
        #expect(filter.statistics[.tooInaccurate] == 0)
        #expect(filter.statistics.accepted == scenario.fixes.count)
        for (id, expected) in scenario.required {
            #expect(crossings(events, id) == expected, "\(id)")
        }
        for (id, possible) in scenario.optional {
            let got = crossings(events, id)
            #expect(got.isEmpty || got == possible, "\(id): \(got)")
        }
        // Every event's distance is the geodesic's to the millimetre (it is taken from the chord's bounds).
        let centres = Dictionary(uniqueKeysWithValues: scenario.regions.map { ($0.id, $0.center) })
        for event in events {
            let fix = try #require(event.fix)
            let exact = Geodesic.distance(
                Coordinate(latitude: fix.latitude, longitude: fix.longitude), try #require(centres[event.region]))
            #expect(
                abs(try #require(event.distance) - exact) < 1e-3, "\(event.region): \(event.distance ?? -1) \(exact)")
        }
        // The large regions are in the poor stretches: the old rule saw none of their fixes.
        let old = DecisionRule.twoConfirmations.run(scenario)
        for id in ["district", "port", "zone", "estate"] { #expect(old[id] == [], "\(id)") }
    }

    @Test("parked an hour on and near a boundary, with lying bursts: no enter or exit")
    func parkedWithLies() {
        for distance in [100.0, 97, 103, 92, 108] {
            let scenario = DecisionScenarios.parked(distance: distance)
            let (events, _, monitor) = run(scenario)
            #expect(crossings(events, "depot") == [], "\(distance) m: \(events.map(\.type))")
            // 60 bursts of 1, 2 and 3 lies in turn: 120 lying fixes, every one of them caught.
            #expect(monitor.outliers >= 120, "\(distance) m: \(monitor.outliers) outliers")
            // And the rules that believe every fix are fooled by them.
            #expect(DecisionRule.naive.run(scenario)["depot"]?.isEmpty == false)
        }
    }

    @Test("parked an hour 20 m inside a 200 m region with eph 150 m: no enter or exit")
    func parkedPoor() {
        let scenario = DecisionScenarios.parkedPoor()
        let (events, _, _) = run(scenario)
        #expect(crossings(events, "block") == [])
    }

    @Test("a 20 s stop inside a 30 m region: enter, then exit")
    func briefStop() {
        let scenario = DecisionScenarios.briefStop()
        let (events, _, monitor) = run(scenario)
        #expect(crossings(events, "pump") == [.enter, .exit])
        #expect(monitor.outliers == 0, "braking and pulling away are motion, not lies")
    }

    @Test("a subject whose first fixes lied is not locked out: the filter starts over from the truth")
    func wrongStartResynchronizes() throws {
        let region = try Region(id: "yard", center: DecisionScenarios.origin, radius: 50)
        var receiver = SyntheticReceiver(seed: 8, start: DecisionScenarios.start)
        receiver.accuracy = 3...5
        var monitor = RegionMonitor()
        monitor.insert(region, seq: 1)
        var filter = FixFilter()
        var events: [RegionEvent] = []
        func feed(_ fix: Fix) {
            guard case .accepted(let weighted) = filter.evaluate(fix) else { return }
            events += monitor.process(weighted, now: DecisionScenarios.start).events
        }
        // Two fixes 400 m away (a cold start), then the truth: parked in the yard.
        for _ in 0..<2 {
            feed(receiver.outlier(at: offset(DecisionScenarios.origin, north: 400, east: 0), error: 0, stated: 4))
        }
        for _ in 0..<20 { feed(receiver.fix(at: DecisionScenarios.origin)) }
        #expect(monitor.resynchronized == 1)
        #expect(monitor.state(subject: receiver.subject, regionID: "yard") == .inside)
    }

    @Test("Docs/events.md compares the rule with the anchors' rules on these scenarios, as measured")
    func comparisonTable() throws {
        var rows: [String] = [
            "| rule | missed crossings | extra events | false events while parked |",
            "|---|---|---|---|",
        ]
        var ours = DecisionScore()
        let scenarios = DecisionScenarios.all
        for rule in DecisionRule.allCases {
            var score = DecisionScore()
            for scenario in scenarios { score.add(scenario, reported: rule.run(scenario)) }
            if rule == .geofence { ours = score }
            rows.append("| \(rule.rawValue) | \(score.missed) | \(score.extra) | \(score.falseWhileParked) |")
        }
        #expect(ours == DecisionScore(), "geofence misses nothing and fires nothing false")
        let table = rows.joined(separator: "\n")

        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let path = repo.appendingPathComponent("Docs/events.md").path
        let doc = try String(contentsOfFile: path, encoding: .utf8)
        let begin = "<!-- comparison: generated by DecisionScenarioTests -->\n"
        let end = "\n<!-- end of comparison -->"
        let head = try #require(doc.range(of: begin), "Docs/events.md has no comparison block")
        let tail = try #require(doc.range(of: end, range: head.upperBound..<doc.endIndex))
        let current = String(doc[head.upperBound..<tail.lowerBound])
        if ProcessInfo.processInfo.environment["GEOFENCE_UPDATE_DOCS"] == "1" {
            try (doc[..<head.upperBound] + table + doc[tail.lowerBound...]).write(
                toFile: path, atomically: true, encoding: .utf8)
        } else {
            #expect(
                current == table,
                "Docs/events.md's comparison is out of date: run GEOFENCE_UPDATE_DOCS=1 swift test --filter DecisionScenario"
            )
        }
    }

    @Test("the fast paths agree with the plain rule on random fleets: poor fixes, lies, jumps, region changes")
    func fastPathsAgreeWithPlainRule() throws {
        for seed in UInt64(1)...6 {
            var rng = SeededGenerator(seed: seed)
            let ids = { EventIDGenerator(rng: SeededGenerator(seed: seed)) }
            var fast = RegionMonitor(ids: ids(), candidateSearch: .spatialIndex)
            var plain = RegionMonitor(ids: ids(), candidateSearch: .linearScan)
            let origin = DecisionScenarios.origin
            var seq: Int64 = 0
            func place() throws -> Region {
                seq += 1
                let radius = [8.0, 30, 100, 400, 1500][Int.random(in: 0..<5, using: &rng)]
                let centre = offset(
                    origin, north: Double.random(in: -3000...3000, using: &rng),
                    east: Double.random(in: -3000...3000, using: &rng))
                // A third are polygons (concave stars of 5 to 12 corners) about the same size.
                guard seq % 3 == 0 else { return try Region(id: "r\(seq)", center: centre, radius: radius) }
                let corners = Int.random(in: 5...12, using: &rng)
                var ring = (0..<corners).map { k in
                    let bearing = 2 * Double.pi * Double(corners - k) / Double(corners)
                    let reach = radius * Double.random(in: 0.4...1.2, using: &rng)
                    return offset(centre, north: reach * cos(bearing), east: reach * sin(bearing))
                }
                ring.append(ring[0])
                return try Region(id: "r\(seq)", polygon: RegionPolygon(parts: [[ring]]))
            }
            var live: [String] = []
            for _ in 0..<300 {
                let region = try place()
                fast.insert(region, seq: seq)
                plain.insert(region, seq: seq)
                live.append(region.id)
            }
            // Vehicles of every kind: driving with good or poor fixes, parked with lies, jumping about.
            var positions = (0..<8).map { _ in
                (
                    north: Double.random(in: -2500...2500, using: &rng),
                    east: Double.random(in: -2500...2500, using: &rng)
                )
            }
            var time = DecisionScenarios.start
            var polygonEvents = 0
            for step in 0..<1500 {
                time = time.addingTimeInterval(1)
                for v in positions.indices {
                    let kind = v % 4
                    if kind == 0 || kind == 1 { positions[v].east += 15 }  // driving
                    if kind == 3 && step % 50 == 0 {
                        positions[v].north += Double.random(in: -2000...2000, using: &rng)
                    }
                    var error = Double.random(in: 0...4, using: &rng)
                    var accuracy = kind == 1 ? Double.random(in: 80...400, using: &rng) : 5
                    if kind == 2 && step % 37 == 0 {
                        error = 60
                        accuracy = 4
                    }
                    let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
                    let at = offset(
                        origin, north: positions[v].north + error * cos(bearing),
                        east: positions[v].east + error * sin(bearing))
                    let fix = Fix(
                        subject: "v\(v)", time: time, mode: .threeD, latitude: at.latitude, longitude: at.longitude,
                        horizontalAccuracy: accuracy)
                    let weighted = WeightedFix(
                        fix: fix, time: time, coordinate: at, accuracy: accuracy, accuracyEstimated: false)
                    let a = fast.process(weighted, now: time)
                    let b = plain.process(weighted, now: time)
                    #expect(a == b, "seed \(seed), step \(step), vehicle \(v)")
                    if a != b { return }
                    polygonEvents += a.events.filter { $0.radius == 0 }.count
                }
                // Regions come and go around the fleet.
                if step % 100 == 50 {
                    let gone = live.remove(at: Int.random(in: 0..<live.count, using: &rng))
                    #expect(fast.remove(id: gone) != nil)
                    plain.remove(id: gone)
                    let region = try place()
                    fast.insert(region, seq: seq)
                    plain.insert(region, seq: seq)
                    live.append(region.id)
                }
            }
            #expect(fast.fixesFromNeighbourhoods > 0, "the neighbourhood path was exercised")
            #expect(fast.outliers > 0, "the outlier path was exercised")
            #expect(polygonEvents > 10, "polygons were crossed")
        }
    }
}

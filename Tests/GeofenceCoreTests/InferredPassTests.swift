import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// Passes between two fixes that are both outside a region (Docs/events.md, "Passes between fixes"), on the
/// sparse reporters of `SparseScenarios`.
@Suite("Inferred passes")
struct InferredPassTests {
    private func run(
        _ scenario: DecisionScenario, configuration: MonitorConfiguration = MonitorConfiguration(),
        search: CandidateSearch = .spatialIndex
    ) -> (events: [RegionEvent], monitor: RegionMonitor, accepted: [WeightedFix]) {
        var filter = FixFilter()
        var monitor = RegionMonitor(
            configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 9)), candidateSearch: search)
        for (i, region) in scenario.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
        var events: [RegionEvent] = []
        var accepted: [WeightedFix] = []
        for fix in scenario.fixes {
            guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
            accepted.append(weighted)
            events += monitor.process(weighted, now: DecisionScenarios.start).events
        }
        return (events, monitor, accepted)
    }

    private func crossings(_ events: [RegionEvent], _ region: String) -> [RegionEventType] {
        events.filter { $0.region == region && ($0.type == .enter || $0.type == .exit) }.map(\.type)
    }

    /// Whether the simplest conservative form of the rule says the pass between two fixes is certain: the
    /// straight segment comes within `r − (b + minMargin)` of the centre, `b` being the ellipse's half minor
    /// axis (the farthest any plausible path strays from the segment), plus 5 m for the implementation's
    /// sampling of the segment. Both fixes must be conclusively outside.
    private func deepPass(_ a: WeightedFix, _ b: WeightedFix, region: Region, c: MonitorConfiguration) -> Bool {
        guard let s1 = a.fix.speed, let s2 = b.fix.speed else { return false }
        let dt = b.time.timeIntervalSince(a.time)
        let d = Geodesic.distance(a.coordinate, b.coordinate)
        guard min(s1, s2) * dt >= 0.5 * d else { return false }
        let sum = max(s1, s2) * dt + c.passAcceleration * dt * dt / 4 + a.accuracy + b.accuracy
        let halfWidth = (sum * sum - d * d).squareRoot() / 2
        let r = region.radius
        let ma = c.margin(accuracy: a.accuracy)
        let mb = c.margin(accuracy: b.accuracy)
        guard Geodesic.distance(a.coordinate, region.center) >= r + ma + 0.01,
            Geodesic.distance(b.coordinate, region.center) >= r + mb + 0.01
        else { return false }
        // The closest approach of the segment, sampled finely (a metre apart, at most 400 samples).
        guard Geodesic.distance(a.coordinate, region.center) < r + d else { return false }
        let n = max(2, min(400, Int(d)))
        var closest = Double.infinity
        for k in 0...n {
            let f = Double(k) / Double(n)
            let p = Coordinate(
                latitude: a.coordinate.latitude + (b.coordinate.latitude - a.coordinate.latitude) * f,
                longitude: a.coordinate.longitude + (b.coordinate.longitude - a.coordinate.longitude) * f)
            closest = min(closest, Geodesic.distance(p, region.center))
        }
        return r - closest >= halfWidth + c.minMargin + 5
    }

    @Test(
        "drives every 10, 30, 60 and 120 s through regions of 50-500 m: every deep pass once, inferred, in order; nothing invented",
        arguments: [10, 30, 60, 120])
    func sparseDrives(interval: Int) throws {
        let c = MonitorConfiguration()
        var deepPasses = 0
        for speed in [10.0, 15, 28] {
            for seed in UInt64(1)...3 {
                let scenario = SparseScenarios.drive(interval: interval, speed: speed, seed: seed)
                let (events, monitor, accepted) = run(scenario)
                // The motion check refuses no honest fix, however far apart they are.
                #expect(monitor.outliers == 0, "\(scenario.name): \(monitor.outliers) refused")
                #expect(accepted.count == scenario.fixes.count)
                // Nothing the true path does not do; each region's crossings in order.
                var score = DecisionScore()
                score.add(
                    scenario,
                    reported: Dictionary(
                        uniqueKeysWithValues: scenario.regions.map { ($0.id, crossings(events, $0.id)) }))
                #expect(score.extra == 0, "\(scenario.name): \(events.map { "\($0.type) \($0.region)" })")
                // The index's segment query finds what testing every region finds, event for event.
                #expect(run(scenario, search: .linearScan).events == events, "\(scenario.name)")
                // The vehicle's events in order of time.
                #expect(zip(events, events.dropFirst()).allSatisfy { $0.time <= $1.time }, "\(scenario.name)")
                for region in scenario.regions {
                    for (a, b) in zip(accepted, accepted.dropFirst()) where deepPass(a, b, region: region, c: c) {
                        deepPasses += 1
                        let got = events.filter { $0.region == region.id && $0.type != .determined }
                        #expect(got.map(\.type) == [.enter, .exit], "\(scenario.name), \(region.id)")
                        for event in got {
                            #expect(event.inferred, "\(scenario.name), \(region.id)")
                            #expect(event.time > a.time && event.time <= b.time, "\(scenario.name), \(region.id)")
                            #expect(event.fix?.latitude == b.coordinate.latitude, "the fix that revealed it")
                        }
                        if got.count == 2 { #expect(got[0].time < got[1].time) }
                    }
                }
            }
        }
        if interval <= 30 { #expect(deepPasses > 0, "the rule was exercised") }
    }

    @Test(
        "a road bending around a region 60 m clear, a U-turn before one, stop and go round one: nothing",
        arguments: [10, 30, 60, 120])
    func nothingInvented(interval: Int) {
        for radius in [50.0, 200, 500] {
            for scenario in [
                SparseScenarios.curvingRoad(interval: interval, radius: radius, speed: 14, seed: 5),
                SparseScenarios.uTurn(interval: interval, radius: radius, speed: 14, seed: 6),
                SparseScenarios.stopAndGo(interval: interval, radius: radius, seed: 7),
            ] {
                let (events, monitor, _) = run(scenario)
                #expect(crossings(events, scenario.regions[0].id) == [], "\(scenario.name)")
                #expect(monitor.outliers == 0, "\(scenario.name): honest fixes, however far apart, are taken in")
            }
        }
    }

    @Test(
        "Traccar's segment rule reports the road bending around a region; the stop-and-go check is what holds it back")
    func adversarialScenariosBite() {
        // The straight segment goes through the region: a segment rule is fooled.
        let bend = SparseScenarios.curvingRoad(interval: 60, radius: 200, speed: 14, seed: 5)
        #expect(SparseRule.segment.run(bend)["park"] == [.enter, .exit])
        // Without the steadiness condition the stop-and-go drive would be a pass: it is the case that needs it.
        let stop = SparseScenarios.stopAndGo(interval: 30, radius: 50, seed: 7)
        let (events, _, accepted) = run(stop)
        #expect(crossings(events, "square") == [])
        #expect(accepted.contains { $0.fix.speed == 0 })
    }

    @Test("a road bending around a square polygon 60 m clear of its corners: nothing", arguments: [10, 30, 60, 120])
    func polygonBendNotInvented(interval: Int) throws {
        // The bent road of `curvingRoad` around a circle of 283 m, and in it a square of 400 m (its corners on
        // that circle): the straight segment between the fixes goes through the square's middle.
        var scenario = SparseScenarios.curvingRoad(interval: interval, radius: 283, speed: 14, seed: 5)
        let o = DecisionScenarios.origin
        let ring = [(-200.0, -200.0), (-200, 200), (200, 200), (200, -200), (-200, -200)].map {
            offset(o, north: $0.0, east: $0.1)
        }
        scenario.regions = [try Region(id: "park", polygon: RegionPolygon(parts: [[ring]]))]
        let (events, monitor, _) = run(scenario)
        #expect(crossings(events, "park") == [], "\(scenario.name)")
        #expect(monitor.outliers == 0)
    }

    /// A square polygon 600 m across, driven through between two fixes 40 s apart at 20 m/s.
    @Test("a polygon passed between two fixes: inferred enter and exit, at the estimated times")
    func polygonPass() throws {
        let o = DecisionScenarios.origin
        let ring = [(-300.0, -300.0), (-300, 300), (300, 300), (300, -300), (-300, -300)].map {
            offset(o, north: $0.0, east: $0.1)
        }
        let region = try Region(id: "yard", polygon: RegionPolygon(parts: [[ring]]))
        // At 28 m/s, fixes every 30 s 420 m either side of the middle (120 m outside), 20 m north of it.
        let path = TruePath.profile(
            from: o, start: (20, -1400), bearing: 90, speeds: Array(repeating: 28, count: 100))
        var scenario = DecisionScenario(
            name: "polygon", regions: [region],
            fixes: SparseScenarios.fixes(along: path, interval: 30, phase: 5, seed: 3), required: [:])
        scenario.required["yard"] = [.enter, .exit]
        let (events, _, accepted) = run(scenario)
        let got = events.filter { $0.type == .enter || $0.type == .exit }
        #expect(got.map(\.type) == [.enter, .exit])
        #expect(got.allSatisfy { $0.inferred })
        #expect(got.allSatisfy { $0.radius == 0 })
        // Enters at 1100 m along (39.3 s), leaves at 1700 m (60.7 s); the fixes say so to a second.
        let enter = try #require(got.first).time.timeIntervalSince(DecisionScenarios.start)
        let exit = try #require(got.last).time.timeIntervalSince(DecisionScenarios.start)
        #expect(abs(enter - 39.3) < 1, "\(enter)")
        #expect(abs(exit - 60.7) < 1, "\(exit)")
        #expect(accepted.count == scenario.fixes.count)
    }

    @Test(
        "a pass may start from a fix in the band, never end on one: in through the band, 5 s unseen, out conclusively"
    )
    func passFromTheBand() throws {
        let o = DecisionScenarios.origin
        let region = try Region(id: "gate", center: o, radius: 40)
        // East at 28 m/s along a line through the centre, fixes of 4 m (margin 5 m, band 35-45 m) every second
        // to 44 m before the centre (in the band), then none for 5 s (a burst refused, a tunnel), then `last`.
        func drive(last: Double, speed lastSpeed: Double = 28) -> [RegionEventType] {
            var monitor = RegionMonitor(ids: EventIDGenerator(rng: SeededGenerator(seed: 9)))
            monitor.insert(region, seq: 1)
            var events: [RegionEvent] = []
            let stations: [(east: Double, speed: Double)] =
                stride(from: -44.0 - 28 * 20, through: -44, by: 28).map { ($0, 28) } + [(last, lastSpeed)]
            for (k, (east, speed)) in stations.enumerated() {
                let time = DecisionScenarios.start.addingTimeInterval(Double(k) + (k == stations.count - 1 ? 4 : 0))
                let at = offset(o, north: 0, east: east)
                var fix = Fix(
                    subject: "truck", time: time, mode: .threeD, latitude: at.latitude, longitude: at.longitude,
                    horizontalAccuracy: 4)
                fix.speed = speed
                fix.course = 90
                let weighted = WeightedFix(
                    fix: fix, time: time, coordinate: at, accuracy: 4, accuracyEstimated: false)
                events += monitor.process(weighted, now: time).events
            }
            #expect(monitor.outliers == 0)
            return events.filter { ($0.type == .enter || $0.type == .exit) && $0.inferred }.map(\.type)
        }
        // 44 m before the centre to 96 m past it in 5 s: every plausible path went through the middle.
        #expect(drive(last: 96) == [.enter, .exit])
        // Ending in the band (44 m past): it may still be inside, so no exit can be said, and no pass.
        #expect(drive(last: 44).isEmpty)
        // Stopped at the end: it may have gone anywhere between.
        #expect(drive(last: 96, speed: 0).isEmpty)
    }

    @Test(
        "across a gap of 6 s at 28 m/s, the courses at both ends rule out the swerve the length allows: a pass"
    )
    func passByTurning() throws {
        let o = DecisionScenarios.origin
        let region = try Region(id: "gate", center: o, radius: 40)
        // East at 28 m/s through the centre, fixes of 8 m (margin 8 m, band 32-48 m) every second to 46 m before
        // the centre (in the band), then none for 6 s (a burst refused), then one 122 m past it. The length
        // allows a path 188.5 m long between fixes 168 m apart: the ellipse is 39 m wide 8 m past the centre,
        // which leaves 1 m, less than `minMargin`. Along the road at both ends (within 5°), a swerve that wide
        // in 6 s takes more than 8 m/s²: at most 29.6 m aside, 34.6 m with the margin, in a region 40 m deep.
        func drive(course: Double? = 90, configuration: MonitorConfiguration = .init()) -> [RegionEventType] {
            var monitor = RegionMonitor(
                configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 9)))
            monitor.insert(region, seq: 1)
            var events: [RegionEvent] = []
            let stations: [(east: Double, speed: Double)] =
                stride(from: -46.0 - 28 * 20, through: -46, by: 28).map { ($0, 28) } + [(122, 28)]
            for (k, (east, speed)) in stations.enumerated() {
                let time = DecisionScenarios.start.addingTimeInterval(Double(k) + (k == stations.count - 1 ? 5 : 0))
                let at = offset(o, north: 0, east: east)
                var fix = Fix(
                    subject: "truck", time: time, mode: .threeD, latitude: at.latitude, longitude: at.longitude,
                    horizontalAccuracy: 8)
                fix.speed = speed
                fix.course = k == stations.count - 1 ? course : 90
                let weighted = WeightedFix(
                    fix: fix, time: time, coordinate: at, accuracy: 8, accuracyEstimated: false)
                events += monitor.process(weighted, now: time).events
            }
            #expect(monitor.outliers == 0)
            return events.filter { ($0.type == .enter || $0.type == .exit) && $0.inferred }.map(\.type)
        }
        #expect(drive() == [.enter, .exit])
        // The length alone does not show it.
        var lengthOnly = MonitorConfiguration()
        lengthOnly.passTurnAcceleration = 0
        #expect(drive(configuration: lengthOnly).isEmpty)
        // Nothing to say without a course at the end, nor with one 30° off the road (it may have come back
        // round), nor for a vehicle that can turn at 12 m/s².
        #expect(drive(course: nil).isEmpty)
        #expect(drive(course: 120).isEmpty)
        #expect(drive(course: 60).isEmpty)
        var sharp = MonitorConfiguration()
        sharp.passTurnAcceleration = 12
        #expect(drive(configuration: sharp).isEmpty)
    }

    @Test(
        "swerves at up to 7.9 m/s² around a circle the straight line goes through: never a pass; through it: passes"
    )
    func swervesAreNeverPasses() throws {
        // Only the turning bound can show a pass here: the length bound is made useless.
        var c = MonitorConfiguration()
        c.passAcceleration = 100
        var rng = SeededGenerator(seed: 27)
        let o = DecisionScenarios.origin
        var reported = 0
        for trial in 0..<300 {
            let speed = Double.random(in: 12...30, using: &rng)
            let time = Double(Int.random(in: 3...8, using: &rng))
            let heading = Double.random(in: 0..<360, using: &rng)
            let side = Bool.random(using: &rng) ? 1.0 : -1.0
            let accuracy = Double.random(in: 2...8, using: &rng)
            let a = 7.9
            // Out and back at `a`: +a for T/4, −a for T/2, +a for T/4, along at `speed`: `a·T²/16` aside at T/2,
            // along the road at both ends.
            func aside(_ t: Double) -> Double {
                let q = time / 4
                if t <= q { return a * t * t / 2 }
                if t <= 3 * q { return a * q * q / 2 + a * q * (t - q) - a * (t - q) * (t - q) / 2 }
                return a * (time - t) * (time - t) / 2
            }
            let h = heading * .pi / 180
            func at(along x: Double, aside y: Double) -> Coordinate {
                offset(o, north: x * cos(h) - side * y * sin(h), east: x * sin(h) + side * y * cos(h))
            }
            // The closest the path comes to the middle of the straight line.
            var closest = Double.infinity
            for k in 0...400 {
                let t = time * Double(k) / 400
                closest = min(closest, hypot(speed * t - speed * time / 2, aside(t)))
            }
            let middle = at(along: speed * time / 2, aside: 0)
            let avoided = try Region(id: "avoided", center: middle, radius: closest - 0.5)
            var monitor = RegionMonitor(configuration: c, ids: EventIDGenerator(rng: SeededGenerator(seed: 9)))
            monitor.insert(avoided, seq: 1)
            // A circle the path goes into, as large as the first fix (20 m clear of it) allows.
            let radius = min(40, speed * time / 2 - 20)
            if radius > closest + 1 {
                monitor.insert(
                    try Region(id: "entered", center: middle, radius: radius), seq: 2)
            }
            var events: [RegionEvent] = []
            for t in [-2.0, -1, 0, time] {
                let angle = Double.random(in: 0..<(2 * .pi), using: &rng)
                let off = accuracy * Double.random(in: 0...1, using: &rng).squareRoot()
                let truth = at(along: speed * t, aside: t < 0 ? 0 : aside(t))
                let place = offset(truth, north: off * cos(angle), east: off * sin(angle))
                let when = DecisionScenarios.start.addingTimeInterval(t + 10)
                var fix = Fix(
                    subject: "van", time: when, mode: .threeD, latitude: place.latitude, longitude: place.longitude,
                    horizontalAccuracy: accuracy)
                fix.speed = speed + Double.random(in: -0.9...0.9, using: &rng)
                var course = heading + Double.random(in: -4.9...4.9, using: &rng)
                course -= 360 * (course / 360).rounded(.down)
                fix.course = course
                let weighted = WeightedFix(
                    fix: fix, time: when, coordinate: place, accuracy: accuracy, accuracyEstimated: false)
                events += monitor.process(weighted, now: when).events
            }
            let passes = events.filter { $0.inferred && $0.type == .enter }
            #expect(!passes.contains { $0.region == "avoided" }, "trial \(trial): a pass the path avoided")
            reported += passes.filter { $0.region == "entered" }.count
        }
        // And the bound does show the passes a swerve of that size cannot avoid: 120 of the 300 trials (with
        // `passTurnAcceleration` at 4, below the swerves' 7.9 m/s², 15 of them also report the avoided circle).
        #expect(reported >= 60, "\(reported)")
    }

    @Test("an inferred enter and exit have distinct ids derived from what they say, the same on every run")
    func identities() throws {
        let scenario = SparseScenarios.drive(interval: 30, speed: 28, seed: 1)
        let first = run(scenario).events.filter(\.inferred)
        let second = run(scenario).events.filter(\.inferred)
        #expect(first.count >= 2)
        let ids = first.map { EventIdentity.id(of: $0) }
        #expect(Set(ids).count == ids.count)
        #expect(ids == second.map { EventIdentity.id(of: $0) })
        // Whole milliseconds: the time survives event JSON, and with it the identity.
        for event in first {
            let ms = event.time.timeIntervalSince1970 * 1000
            #expect(abs(ms - ms.rounded()) < 1e-3)
            let json = event.json
            let back = try #require(RegionEvent(json: json))
            #expect(back.inferred && back.time == event.time)
            #expect(EventIdentity.id(of: back) == EventIdentity.id(of: event))
        }
    }

    @Test("off: no pass is inferred")
    func configurable() {
        var c = MonitorConfiguration()
        c.inferPasses = false
        let scenario = SparseScenarios.drive(interval: 30, speed: 28, seed: 1)
        #expect(run(scenario).events.contains { $0.inferred })
        #expect(!run(scenario, configuration: c).events.contains { $0.inferred })
    }

    @Test("a take-over from a checkpoint, or a restart from the store, infers the same passes")
    func takeOver() throws {
        let scenario = SparseScenarios.drive(interval: 30, speed: 28, seed: 1)
        let (all, _, accepted) = run(scenario)
        let inferred = all.filter(\.inferred)
        try #require(!inferred.isEmpty)
        // Stop just before the fix that revealed the first pass; hand the vehicle over; go on.
        let reveal = try #require(accepted.firstIndex { $0.time >= inferred[0].time })
        var owner = RegionMonitor()
        for (i, region) in scenario.regions.enumerated() { owner.insert(region, seq: Int64(i + 1)) }
        var before: [RegionEvent] = []
        for fix in accepted[..<reveal] { before += owner.process(fix, now: DecisionScenarios.start).events }
        let state = try #require(owner.vehicleState(of: "van-7"))
        #expect(state.lastFix != nil)
        let checkpoint = PartitionCheckpoint(
            fixSequence: 1, regionSeq: Int64(scenario.regions.count),
            vehicles: ["van-7": .init(state: state, filter: nil)])
        let decoded = try PartitionCheckpoint(decoding: checkpoint.encode())
        #expect(decoded.vehicles["van-7"]?.state == state, "the last fix survives the encoding bit for bit")

        func rest(_ monitor: inout RegionMonitor) -> [RegionEvent] {
            var events: [RegionEvent] = []
            for fix in accepted[reveal...] { events += monitor.process(fix, now: DecisionScenarios.start).events }
            return events
        }
        var heir = RegionMonitor()
        for (i, region) in scenario.regions.enumerated() { heir.insert(region, seq: Int64(i + 1)) }
        heir.restore(try #require(decoded.vehicles["van-7"]?.state))
        let after = rest(&heir)
        let strip = { (events: [RegionEvent]) in events.map { "\($0.type) \($0.region) \($0.time) \($0.inferred)" } }
        #expect(strip(before + after) == strip(all))

        // The store keeps the last fix as a record: restoring from it infers the first pass too.
        var restarted = RegionMonitor()
        for (i, region) in scenario.regions.enumerated() { restarted.insert(region, seq: Int64(i + 1)) }
        let record = SubjectRecord(
            lastFixTime: accepted[reveal - 1].time, baselineSeq: Int64(scenario.regions.count),
            lastFix: EventFix(accepted[reveal - 1]))
        restarted.restore(subject: "van-7", record: record, pairs: [])
        let fromStore = rest(&restarted)
        #expect(fromStore.filter(\.inferred).first.map { strip([$0]) } == strip([inferred[0]]))
    }

    @Test("a hostile checkpoint's last fix is refused: out of range, not finite, of no mode, without its time")
    func hostileLastFix() throws {
        let fix = EventFix(latitude: 48.8, longitude: 2.3, accuracy: 5, mode: .threeD, speed: 10, course: 90)
        let state = VehicleState(
            subject: "v", lastFixTime: DecisionScenarios.start, baselineSeq: 1, lastFix: fix)
        let bytes = PartitionCheckpoint(fixSequence: 1, regionSeq: 1, vehicles: ["v": .init(state: state, filter: nil)])
            .encode()
        #expect(try PartitionCheckpoint(decoding: bytes).vehicles["v"]?.state?.lastFix == fix)
        // Re-encode with a latitude of 100: refused with the field's name.
        var bad = state
        bad.lastFix?.latitude = 100
        let hostile = PartitionCheckpoint(fixSequence: 1, regionSeq: 1, vehicles: ["v": .init(state: bad, filter: nil)])
            .encode()
        #expect(throws: PartitionCheckpointError.self) { try PartitionCheckpoint(decoding: hostile) }
        bad.lastFix?.latitude = .nan
        let nan = PartitionCheckpoint(fixSequence: 1, regionSeq: 1, vehicles: ["v": .init(state: bad, filter: nil)])
            .encode()
        #expect(throws: PartitionCheckpointError.self) { try PartitionCheckpoint(decoding: nan) }
        // A last fix without a time is not written (a pass starts from both).
        var timeless = state
        timeless.lastFixTime = nil
        let written = PartitionCheckpoint(
            fixSequence: 1, regionSeq: 1, vehicles: ["v": .init(state: timeless, filter: nil)])
        #expect(try PartitionCheckpoint(decoding: written.encode()).vehicles["v"]?.state?.lastFix == nil)
    }

    @Test("every 60 s: dwell fires inside, expiry still ends a region, the gap rule marks changes across 120 s")
    func sparseDwellAndExpiry() throws {
        let o = DecisionScenarios.origin
        let dwelling = try Region(id: "depot", center: o, radius: 300, dwell: .seconds(150))
        let expiring = try Region(
            id: "event", center: offset(o, north: 0, east: 5000), radius: 300,
            expires: DecisionScenarios.start.addingTimeInterval(400))
        // Parked in the depot for five minutes, reporting every 60 s.
        let path = TruePath(points: Array(repeating: o, count: 600))
        var scenario = DecisionScenario(
            name: "parked", regions: [dwelling, expiring],
            fixes: SparseScenarios.fixes(along: path, interval: 60, seed: 2), required: [:])
        scenario.parked = true
        let (events, monitor, _) = run(scenario)
        #expect(events.map(\.type).contains(.dwell))
        let dwell = try #require(events.first { $0.type == .dwell })
        #expect(dwell.time.timeIntervalSince(DecisionScenarios.start) == 180, "the first fix 150 s after entering")
        #expect(events.contains { $0.type == .expired && $0.region == "event" })
        #expect(monitor.outliers == 0)
    }
}

extension InferredPassTests {
    @Test("Docs/events.md compares the rules on sparse reporters, as measured")
    func sparseComparisonTable() throws {
        let intervals = [10, 30, 60, 120]
        let scenarios = intervals.map { SparseScenarios.all(interval: $0) }
        var crossings: [Int] = []
        for set in scenarios {
            crossings.append(set.reduce(0) { sum, s in sum + s.required.values.reduce(0) { $0 + $1.count } })
        }
        var rows = [
            "| rule | " + intervals.map { "every \($0) s: missed / invented" }.joined(separator: " | ") + " |",
            "|---|" + intervals.map { _ in "---|" }.joined(),
            "| real crossings (of them) | " + crossings.map(String.init).joined(separator: " | ") + " |",
        ]
        for rule in SparseRule.allCases {
            var cells: [String] = []
            for set in scenarios {
                var score = DecisionScore()
                for scenario in set { score.add(scenario, reported: rule.run(scenario)) }
                cells.append("\(score.missed) / \(score.extra)")
                if rule == .geofence || rule == .plain { #expect(score.extra == 0, "\(rule.rawValue) invents nothing") }
            }
            rows.append("| \(rule.rawValue) | " + cells.joined(separator: " | ") + " |")
        }
        let table = rows.joined(separator: "\n")
        try GeneratedDocBlock.check("sparse comparison", in: "Docs/events.md", by: "InferredPassTests", is: table)
    }
}

/// The rules of the sparse comparison (Docs/events.md, "Passes between fixes").
enum SparseRule: String, CaseIterable {
    case segment = "Traccar segment crossing (`event.geofence.segmentCrossing`)"
    case naive = "naive d ≤ r per fix (Tile38, Traccar)"
    case plain = "geofence, passes off"
    case geofence = "geofence, passes on (default)"

    func run(_ scenario: DecisionScenario) -> [String: [RegionEventType]] {
        switch self {
        case .naive: return DecisionRule.naive.run(scenario)
        case .plain, .geofence:
            var c = MonitorConfiguration()
            c.inferPasses = self == .geofence
            var filter = FixFilter()
            var monitor = RegionMonitor(configuration: c)
            for (i, region) in scenario.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
            var reported: [String: [RegionEventType]] = [:]
            for region in scenario.regions { reported[region.id] = [] }
            for fix in scenario.fixes {
                guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
                for event in monitor.process(weighted, now: DecisionScenarios.start).events
                where event.type == .enter || event.type == .exit {
                    reported[event.region, default: []].append(event.type)
                }
            }
            return reported
        case .segment:
            // Traccar: a fix inside is inside (d ≤ r); a segment between two fixes outside that meets the
            // circle is a crossing (reported as its enter and exit).
            var reported: [String: [RegionEventType]] = [:]
            for region in scenario.regions {
                var got: [RegionEventType] = []
                var inside: Bool?
                var last: Coordinate?
                for fix in scenario.fixes {
                    guard let lat = fix.latitude, let lon = fix.longitude else { continue }
                    let p = Coordinate(latitude: lat, longitude: lon)
                    let now = Geodesic.distance(p, region.center) <= region.radius
                    if let was = inside, was != now { got.append(now ? .enter : .exit) }
                    if inside == false, !now, let last {
                        let n = 200
                        let hits = (1..<n).contains { k in
                            let f = Double(k) / Double(n)
                            let q = Coordinate(
                                latitude: last.latitude + (p.latitude - last.latitude) * f,
                                longitude: last.longitude + (p.longitude - last.longitude) * f)
                            return Geodesic.distance(q, region.center) <= region.radius
                        }
                        if hits { got += [.enter, .exit] }
                    }
                    inside = now
                    last = p
                }
                reported[region.id] = got
            }
            return reported
        }
    }
}

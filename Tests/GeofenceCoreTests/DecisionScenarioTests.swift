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

    /// `run`'s events, each with the index of the fix that brought it out (later than its own fix for a pass
    /// inferred between fixes, or for the fixes of a run that started the motion over, decided when it did).
    private func arrivals(_ scenario: DecisionScenario) -> [(event: RegionEvent, arrival: Int)] {
        var filter = FixFilter()
        var monitor = RegionMonitor()
        for (i, region) in scenario.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
        var out: [(RegionEvent, Int)] = []
        for (i, fix) in scenario.fixes.enumerated() {
            guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
            out += monitor.process(weighted, now: DecisionScenarios.start).events.map { ($0, i) }
        }
        return out
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

    @Test(
        "parked on a circle's edge, bursts of 1, 2 and 3 lies together, opposed and at angles, 8 seeds each: no enter or exit",
        arguments: [200.0, 40])
    func parkedOnEdgeWithBursts(radius: Double) {
        for burst in 1...3 {
            for pattern in DecisionScenarios.BurstPattern.allCases {
                for seed in UInt64(1)...8 {
                    // On the boundary, and 3 m inside and outside it, in turn.
                    let edge = [0.0, -3, 3][Int(seed % 3)]
                    let scenario = DecisionScenarios.parkedOnEdge(
                        radius: radius, offset: edge, burst: burst, pattern: pattern, seed: seed)
                    let (events, filter, monitor) = run(scenario)
                    #expect(crossings(events, "edge") == [], "\(scenario.name), seed \(seed): \(events.map(\.type))")
                    // Every lie refused (by the motion check, or as a jump by the fix filter), and hardly an
                    // honest fix with them: the truth is not lost.
                    let refused = monitor.outliers + filter.statistics[.implausibleJump]
                    #expect(refused >= 60 * burst, "\(scenario.name), seed \(seed): \(refused) refused")
                    #expect(refused <= 60 * burst + 10, "\(scenario.name), seed \(seed): \(refused) refused")
                    // At most the rare start over, from honest fixes the motion check refused after a burst.
                    #expect(monitor.resynchronized <= 1, "\(scenario.name), seed \(seed)")
                }
            }
        }
    }

    /// What a subject moving through a burst got, against its true path (see `checkTiming`).
    private struct Timing {
        /// The required crossings, each once, in order, none before the subject is across the boundary.
        var right: Bool
        /// Nothing reported, where the burst may hide the entry.
        var hidden: Bool
        /// Where the burst may hide the entry, the crossings reported, all as an inferred pass (Docs/events.md,
        /// "Passes between fixes") across the burst.
        var passed = false
        /// Where the burst may hide the entry, the crossings reported, some of them by honest fixes the motion
        /// check had refused, decided when their run started it over (Docs/events.md, "Decisions on the track").
        var replayed = false
        /// The most fixes any event came after the first honest fix that had to be conclusive.
        var late: Int
        var got: [RegionEventType]
    }

    /// Measures the events of a subject moving through a burst against its true path: each required
    /// crossing is to be reported once, in order, never before the subject is across the boundary; `late`
    /// counts the fixes after the first honest fix that has to be conclusive (the subject 24 m across: more
    /// than the widest margin, 12 m, plus an honest error of up to 11.4 m; if that second is one of the
    /// burst's, the fix after the burst). An entry may be missed only when the burst hides it: lies just
    /// before or while the subject is deep inside, and no more than `MotionConsistency.resyncRun` honest
    /// fixes deep inside after them (a subject whose motion changed sharply during the burst is refused
    /// until a run of that many agrees). An inferred pass is reported by the first fix taken in after the
    /// burst, with the estimated times of its crossings: it is measured at that fix (never early, and `late`
    /// from it), not at the times it estimates. So is an event of a refused fix, decided when its run started the
    /// motion over: `late` to that fix; never early, by its own fix's time.
    private func timing(_ scenario: DecisionScenario, path: TruePath, burstAt: Int, burst: Int) -> Timing {
        let region = scenario.regions[0]
        let arrived = arrivals(scenario).filter { $0.event.type == .enter || $0.event.type == .exit }
        let got = arrived.map(\.event)
        let expected = scenario.required[region.id] ?? []
        let distances = path.points.map { Geodesic.distance($0, region.center) }
        let lies = burstAt..<(burstAt + burst)
        let honestInsideAfterBurst = distances.indices.filter {
            $0 >= lies.upperBound && distances[$0] <= region.radius - 24
        }
        let firstDeep = distances.firstIndex { $0 <= region.radius - 24 } ?? distances.count
        let hidden =
            lies.upperBound + Int(MotionConsistency.resyncRun) > firstDeep
            && honestInsideAfterBurst.count <= Int(MotionConsistency.resyncRun)
        var timing = Timing(
            right: got.map(\.type) == expected, hidden: hidden && got.isEmpty, late: 0, got: got.map(\.type))
        guard timing.right else { return timing }
        timing.passed = hidden && got.allSatisfy(\.inferred)
        var from = 0
        for (event, arrival) in arrived {
            let inside = event.type == .enter
            // Its own fix's second: for an inferred pass, an estimate; for a fix of a run replayed, a fix seen.
            let own = Int(event.time.timeIntervalSince(DecisionScenarios.start).rounded())
            if !event.inferred && arrival > own { timing.replayed = hidden }
            let across = distances[from...].firstIndex { inside ? $0 < region.radius : $0 > region.radius }!
            var clear = distances[from...].firstIndex {
                inside ? $0 <= region.radius - 24 : $0 >= region.radius + 24
            }!
            if lies.contains(clear) { clear = lies.upperBound }
            // Never before the subject is across: neither the fix that decided, nor (when it is a fix) its own.
            if arrival < across || (!event.inferred && own < across) { timing.right = false }
            // Late: measured when it came out, not at the time it carries.
            timing.late = max(timing.late, arrival - clear)
            from = event.inferred ? arrival : own
        }
        return timing
    }

    /// `timing`, held to: right (or hidden), at most `late` fixes late.
    private func checkTiming(
        _ scenario: DecisionScenario, path: TruePath, burstAt: Int, burst: Int, late: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let t = timing(scenario, path: path, burstAt: burstAt, burst: burst)
        if t.hidden { return }
        #expect(t.right, "\(scenario.name): \(t.got)", sourceLocation: sourceLocation)
        #expect(t.late <= late, "\(scenario.name): \(t.late) fixes late", sourceLocation: sourceLocation)
    }

    /// The moving scenarios, with a burst of `burst` lies placed about each crossing or change of motion.
    private func movingScenarios(burst: Int) -> [(
        scenario: DecisionScenario, path: TruePath, burstAt: Int, kind: String
    )] {
        var out: [(DecisionScenario, TruePath, Int, String)] = []
        for radius in [40.0, 200] {
            for acceleration in [2.5, 4] {
                let (path, region) = DecisionScenarios.pullingAway(radius: radius, acceleration: acceleration)
                // Bursts from four seconds before it moves to while it crosses.
                for start in 56...66 {
                    for pattern in DecisionScenarios.BurstPattern.allCases {
                        let scenario = DecisionScenarios.movingThroughBurst(
                            "pulling away at \(acceleration) m/s² into a \(Int(radius)) m region", path: path,
                            region: region, burstAt: start, burst: burst, pattern: pattern, seed: UInt64(start))
                        out.append((scenario, path, start, "pull-away"))
                    }
                }
            }
        }
        for radius in [40.0, 200] {
            for speed in [10.0, 28] {
                // Half a minute of driving before the region, so that the motion is known.
                let approach = 30 * speed
                let length = 2 * radius + 2 * approach
                let path = TruePath.profile(
                    from: DecisionScenarios.origin, start: (0, -(radius + approach)), bearing: 90,
                    speeds: Array(repeating: speed, count: Int(length / speed)))
                let region = try! Region(id: "gate", center: DecisionScenarios.origin, radius: radius)
                let entry = Int(approach / speed)
                let exit = Int((approach + 2 * radius) / speed)
                for crossing in [entry, exit] {
                    for start in (crossing - 3)...(crossing + 2) {
                        for pattern in DecisionScenarios.BurstPattern.allCases {
                            let scenario = DecisionScenarios.movingThroughBurst(
                                "\(speed) m/s through a \(Int(radius)) m region", path: path, region: region,
                                burstAt: start, burst: burst, pattern: pattern, seed: UInt64(start * 7 + burst))
                            out.append((scenario, path, start, "drive-through"))
                        }
                    }
                }
            }
        }
        for deceleration in [4.0, 7] {
            let (path, region) = DecisionScenarios.brakingInto(deceleration: deceleration)
            for start in 8...16 {
                for pattern in DecisionScenarios.BurstPattern.allCases {
                    let scenario = DecisionScenarios.movingThroughBurst(
                        "braking at \(deceleration) m/s² into a 200 m region", path: path, region: region,
                        burstAt: start, burst: burst, pattern: pattern, seed: UInt64(start * 3 + burst))
                    out.append((scenario, path, start, deceleration > 6 ? "braking-into-7" : "braking-into-4"))
                }
            }
        }
        return out
    }

    @Test(
        "a truck pulling away from parked, across the edge, through a burst of lies: enter and exit, at most 7 fixes late"
    )
    func pullAwayThroughBurst() {
        var missed: [String] = []
        for burst in 1...3 {
            for m in movingScenarios(burst: burst) where m.kind == "pull-away" {
                let t = timing(m.scenario, path: m.path, burstAt: m.burstAt, burst: burst)
                // No miss the burst did not hide. Until the refused fixes of a run that starts the motion over were
                // replayed, one: after a burst of two 4 s before it moves, a truck pulling away at 2.5 m/s² through a
                // 40 m region (4 fixes deep inside) had its fixes refused from the 5th second on (the track lags the
                // acceleration), and the run of `resyncRun` (7) that started it over came as it left.
                if !t.right && !t.hidden && t.got.isEmpty {
                    missed.append(m.scenario.name)
                    continue
                }
                checkTiming(m.scenario, path: m.path, burstAt: m.burstAt, burst: burst, late: 7)
            }
        }
        #expect(missed == [])
    }

    @Test(
        "pulling away through a burst: the honest fixes refused until their run starts the motion over decide then, with their own fixes and times"
    )
    func refusedRunReplayed() {
        // Before the run's fixes were replayed, only the fix that started the motion over decided: a region crossed
        // while the others were refused was missed. Measured: 71 of these 396 pull-aways reported by a replayed run;
        // 60 since the track takes in the velocity its fixes report (it follows the acceleration, and fewer honest
        // fixes are refused in the first place).
        var scenarios = 0
        for burst in 1...3 {
            for m in movingScenarios(burst: burst) where m.kind == "pull-away" {
                let arrived = arrivals(m.scenario).filter { $0.event.type == .enter || $0.event.type == .exit }
                var late = false
                for (event, arrival) in arrived where !event.inferred {
                    let own = Int(event.time.timeIntervalSince(DecisionScenarios.start).rounded())
                    guard arrival > own else { continue }
                    late = true
                    // Its own fix, decided when the run it was refused in started the motion over: at most a run's
                    // length later, and never the run's first (which can be the burst's last lie).
                    #expect(arrival - own < Int(MotionConsistency.resyncRun), "\(m.scenario.name)")
                    #expect(event.fix?.latitude == m.scenario.fixes[own].latitude, "\(m.scenario.name)")
                    #expect(event.fix?.longitude == m.scenario.fixes[own].longitude, "\(m.scenario.name)")
                }
                if late { scenarios += 1 }
            }
        }
        #expect(scenarios >= 55, "\(scenarios) pull-aways reported by a replayed run")
    }

    @Test("a drive through a region with a burst of lies at the entry or the exit: both crossings, at most 1 fix late")
    func driveThroughBurst() {
        for burst in 1...3 {
            for m in movingScenarios(burst: burst) where m.kind == "drive-through" {
                checkTiming(m.scenario, path: m.path, burstAt: m.burstAt, burst: burst, late: 1)
            }
        }
    }

    @Test(
        "a burst of five hides a drive through a 40 m region at 28 m/s: an inferred pass, reported by the first fix after it; parked and braked, nothing"
    )
    func burstHiddenDriveThroughIsAPass() throws {
        // Fixes of seconds 31-35 lie (the subject 12 m past the centre to 128 m out); the fix before, 45.7 m from
        // the centre (claiming 9.7 m), is in the band, and the one after, 127.5 m out, is conclusively outside.
        // Before the pass could start from a fix in the band (and before the fixes reported a speed), nothing.
        let speed = 28.0
        let path = TruePath.profile(
            from: DecisionScenarios.origin, start: (0, -(40 + 30 * speed)), bearing: 90,
            speeds: Array(repeating: speed, count: Int((80 + 60 * speed) / speed)))
        let region = try Region(id: "gate", center: DecisionScenarios.origin, radius: 40)
        let scenario = DecisionScenarios.movingThroughBurst(
            "28 m/s through a 40 m region", path: path, region: region, burstAt: 31, burst: 5, pattern: .together,
            seed: 31 * 7 + 5)
        let (events, _, monitor) = run(scenario)
        let got = events.filter { $0.type == .enter || $0.type == .exit }
        #expect(got.map(\.type) == [.enter, .exit])
        #expect(got.allSatisfy { $0.inferred })
        #expect(monitor.outliers == 5, "the five lies, and no honest fix, refused")
        // Estimated between the last fix before the burst and the first after it, which revealed the pass.
        let before = try #require(scenario.fixes[30].time)
        let after = try #require(scenario.fixes[36].time)
        for event in got {
            #expect(event.time > before && event.time <= after, "\(event.type) at \(event.time)")
            #expect(event.fix?.latitude == scenario.fixes[36].latitude)
        }
        // The same bursts, parked and braked at 7 m/s² onto the edge (speeds of 0 at the stop): nothing.
        for offset in [0.0, -3, 3] {
            for pattern in DecisionScenarios.BurstPattern.allCases {
                let still = DecisionScenarios.parkedOnEdge(
                    radius: 40, offset: offset, burst: 5, pattern: pattern, seed: 2)
                #expect(crossings(run(still).events, "edge") == [], "\(still.name)")
                let stopped = DecisionScenarios.brakedOnEdge(
                    radius: 40, offset: offset, burst: 5, pattern: pattern, seed: 2)
                #expect(crossings(run(stopped).events, "edge") == [], "\(stopped.name)")
            }
        }
    }

    @Test(
        "braking at 4 and 7 m/s² into a region and stopping 30 m inside, through a burst of lies: one enter, at most 6 fixes late"
    )
    func brakeThroughBurst() {
        for burst in 1...3 {
            for m in movingScenarios(burst: burst) where m.kind.hasPrefix("braking-into") {
                checkTiming(m.scenario, path: m.path, burstAt: m.burstAt, burst: burst, late: 6)
            }
        }
    }

    @Test(
        "braking hard (7 m/s²) onto a circle's edge with a burst of 1, 2 or 3 lies at once, then parked an hour: no enter or exit",
        arguments: [200.0, 40])
    func brakedOnEdgeWithBursts(radius: Double) {
        for burst in 1...3 {
            for pattern in DecisionScenarios.BurstPattern.allCases {
                for seed in UInt64(1)...8 {
                    let edge = [0.0, -3, 3][Int(seed % 3)]
                    let scenario = DecisionScenarios.brakedOnEdge(
                        radius: radius, offset: edge, burst: burst, pattern: pattern, seed: seed)
                    let (events, _, _) = run(scenario)
                    #expect(crossings(events, "edge") == [], "\(scenario.name), seed \(seed): \(events.map(\.type))")
                }
            }
        }
    }

    @Test(
        "the lies of bursts of 5 and 6 that gave false events are refused: a parked track's noise velocity carried towards them, a braked track's overshoot"
    )
    func longBurstLiesRefused() {
        // Parked 3 m inside a 200 m circle, bursts of five: the fifth lie of one (27-31 m off, claiming 4 m, 5 s
        // after the last fix taken in) was 17-19 m from where the track's velocity (1.4-1.7 m/s, its fixes'
        // noise) carried the expectation, and passed as likelier honest: `exit`, then `enter` when the honest
        // fixes started the filter over. Braked at 7 m/s² onto a 40 m circle's edge with a burst of six at
        // once: the sixth lie fell 19 m from where the track, still at 10 m/s, overshot the stop. Three braked
        // hours on seeds the table does not use: a lie 100-115 m from that overshot expectation, judged by the
        // gate alone as a departure until the burst rule reached as far as the track's velocity carries it.
        let scenarios = [
            DecisionScenarios.parkedOnEdge(radius: 200, offset: -3, burst: 5, pattern: .opposed, seed: 4),
            DecisionScenarios.parkedOnEdge(radius: 200, offset: -3, burst: 5, pattern: .angled, seed: 1),
            DecisionScenarios.brakedOnEdge(radius: 40, offset: -3, burst: 6, pattern: .angled, seed: 4),
            DecisionScenarios.brakedOnEdge(radius: 40, offset: 3, burst: 6, pattern: .together, seed: 8),
            DecisionScenarios.brakedOnEdge(radius: 40, offset: 3, burst: 6, pattern: .angled, seed: 8),
            DecisionScenarios.brakedOnEdge(radius: 200, offset: -3, burst: 6, pattern: .angled, seed: 13),
            // The last lie of a burst of four (27 m off, claiming 4.4 m) headed the run of honest fixes (10-11 m) that
            // started the motion over: replayed with them, it gave `exit`, and the honest fix after it `enter`. A run's
            // first fix is not replayed.
            DecisionScenarios.parkedOnEdge(radius: 200, offset: -3, burst: 4, pattern: .angled, seed: 4),
            DecisionScenarios.brakedOnEdge(radius: 40, offset: -3, burst: 2, pattern: .opposed, seed: 4),
            // On a seed the table does not use: the fourth lie of a burst fell 16 m from where the track, still at
            // 10 m/s, expected the truck 4 s after the last fix taken in, and was taken in: `exit`. That fix had
            // reported 7 m/s, braking; taken in with its position, the track slows and the lie is refused.
            DecisionScenarios.brakedOnEdge(radius: 40, offset: -3, burst: 4, pattern: .angled, seed: 16),
            DecisionScenarios.brakedOnEdge(radius: 40, offset: -3, burst: 5, pattern: .angled, seed: 16),
            DecisionScenarios.brakedOnEdge(radius: 40, offset: -3, burst: 6, pattern: .angled, seed: 16),
        ]
        for scenario in scenarios {
            let (events, _, _) = run(scenario)
            #expect(crossings(events, "edge") == [], "\(scenario.name): \(events.map(\.type))")
        }
    }

    @Test(
        "a drive-through whose only honest fix inside is in the band, the others lies of a burst of 2 to 4: a pass across it, also after a hand-over at any fix"
    )
    func passAcrossBandFix() throws {
        // 10 and 28 m/s through circles of 40 and 200 m, bursts at the entry and exit. Where the burst took every fix
        // inside but one, and that one was in the band (10 m deep at 28 m/s, claiming 11 m), the fix before it and
        // the one after were both conclusively outside, but a pass was looked for only between consecutive fixes
        // taken in: 4, 6 and 4 drive-throughs were hidden by bursts of 2, 3 and 4. From the fix before, across it,
        // every plausible path goes through the region.
        var across = 0
        var checked: [DecisionScenario] = []
        for burst in 2...4 {
            for m in movingScenarios(burst: burst) where m.kind == "drive-through" {
                let t = timing(m.scenario, path: m.path, burstAt: m.burstAt, burst: burst)
                #expect(!t.hidden && t.right, "\(m.scenario.name), burst of \(burst)")
                if t.passed {
                    across += 1
                    if burst == 2 { checked.append(m.scenario) }
                }
            }
        }
        #expect(across >= 36, "\(across) reported as inferred passes (22 before the pass across)")
        // A partition handed over after any fix of those of bursts of 2: the same events (the anchor is in the
        // checkpoint; without it, a cut between the fix in the band and the next hides the pass).
        #expect(checked.count >= 6)
        for scenario in checked {
            try handOverEverywhere(scenario)
        }
    }

    private func handOverEverywhere(_ scenario: DecisionScenario) throws {
        func events(cut: Int?) throws -> [RegionEventType] {
            var filter = FixFilter()
            var monitor = RegionMonitor()
            for (i, region) in scenario.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
            var out: [RegionEvent] = []
            for (i, fix) in scenario.fixes.enumerated() {
                if i == cut {
                    let bytes = PartitionCheckpoint(fixSequence: UInt64(i), monitor: monitor, filter: filter).encode()
                    var (nextFilter, next) = (FixFilter(), RegionMonitor())
                    for (i, region) in scenario.regions.enumerated() { next.insert(region, seq: Int64(i + 1)) }
                    try PartitionCheckpoint(decoding: bytes).restore(into: &next, filter: &nextFilter)
                    (filter, monitor) = (nextFilter, next)
                }
                guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
                out += monitor.process(weighted, now: DecisionScenarios.start).events
            }
            return out.filter { $0.type == .enter || $0.type == .exit }.map(\.type)
        }
        let whole = try events(cut: nil)
        #expect(whole == [.enter, .exit])
        for cut in 1..<scenario.fixes.count {
            #expect(try events(cut: cut) == whole, "\(scenario.name): cut before fix \(cut)")
        }
    }

    @Test("Docs/events.md states the limit for bursts of 1 to 6 lies, parked, braked and moving, as measured")
    func longBurstsLimit() throws {
        var rows: [String] = [
            "| lies in a burst | parked: hours with a false event | braked at 7 m/s², parked: hours with a false event | moving, missed where the burst hid it: pull-away / drive-through / braking-into | moving, hidden by the burst but reported as an inferred pass: pull-away / drive-through / braking-into | moving, hidden by the burst but reported by the refused fixes when they started the motion over: pull-away / drive-through / braking-into | moving, missed otherwise | moving, false or early | most fixes late: pull-away / drive-through / braking-into at 4 / 7 m/s² |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for burst in 1...6 {
            // An hour on the edge of a 200 m and of a 40 m circle, each pattern, four seeds (0, 3 m in and out).
            var parked = 0
            var braked = 0
            for radius in [200.0, 40] {
                for pattern in DecisionScenarios.BurstPattern.allCases {
                    for seed in UInt64(1)...4 {
                        let edge = [0.0, -3, 3][Int(seed % 3)]
                        let still = DecisionScenarios.parkedOnEdge(
                            radius: radius, offset: edge, burst: burst, pattern: pattern, seed: seed)
                        if !crossings(run(still).events, "edge").isEmpty { parked += 1 }
                        let stopped = DecisionScenarios.brakedOnEdge(
                            radius: radius, offset: edge, burst: burst, pattern: pattern, seed: seed)
                        if !crossings(run(stopped).events, "edge").isEmpty { braked += 1 }
                    }
                }
            }
            // Scenarios with a crossing missed (`hidden`: the burst hid it), with an event the path does not
            // have or too early, and the most fixes late, by kind.
            var hidden: [String: Int] = [:]
            var passed: [String: Int] = [:]
            var replayed: [String: Int] = [:]
            var missed: [String: Int] = [:]
            var wrong = 0
            var late: [String: Int] = [:]
            let moving = movingScenarios(burst: burst)
            for m in moving {
                let kind = m.kind.hasPrefix("braking-into") ? "braking-into" : m.kind
                let t = timing(m.scenario, path: m.path, burstAt: m.burstAt, burst: burst)
                if t.hidden {
                    hidden[kind, default: 0] += 1
                } else if !t.right && t.got.count < (m.scenario.required.first?.value.count ?? 0) {
                    missed[kind, default: 0] += 1
                } else if !t.right {
                    wrong += 1
                } else {
                    if t.passed { passed[kind, default: 0] += 1 }
                    if t.replayed { replayed[kind, default: 0] += 1 }
                    late[m.kind] = max(late[m.kind] ?? 0, t.late)
                }
            }
            let kinds = ["pull-away", "drive-through", "braking-into"]
            let lateness = ["pull-away", "drive-through", "braking-into-4", "braking-into-7"].map {
                late[$0].map(String.init) ?? "-"
            }
            rows.append(
                "| \(burst) | \(parked) of 24 | \(braked) of 24 | \(kinds.map { String(hidden[$0] ?? 0) }.joined(separator: " / ")) | \(kinds.map { String(passed[$0] ?? 0) }.joined(separator: " / ")) | \(kinds.map { String(replayed[$0] ?? 0) }.joined(separator: " / ")) | \(kinds.map { String(missed[$0] ?? 0) }.joined(separator: " / ")) | \(wrong) | \(lateness.joined(separator: " / ")) |"
            )
            // Bursts of up to six: no false event parked or braked (issue 27's acceptance), nothing false while moving.
            #expect(parked == 0 && braked == 0, "bursts of \(burst): \(parked) parked, \(braked) braked")
            #expect(wrong == 0, "bursts of \(burst): \(wrong) wrong")
        }
        try GeneratedDocBlock.check(
            "long bursts", in: "Docs/events.md", by: "DecisionScenarioTests", is: rows.joined(separator: "\n"))
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
        try GeneratedDocBlock.check(
            "comparison", in: "Docs/events.md", by: "DecisionScenarioTests", is: rows.joined(separator: "\n"))
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

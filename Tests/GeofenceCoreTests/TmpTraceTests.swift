import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

@Suite("tmp trace")
struct TmpTraceTests {
    @Test func pullAways() {
        for burst in 3...3 {
            for radius in [40.0, 200] {
                for acceleration in [2.5, 4] {
                    let (path, region) = DecisionScenarios.pullingAway(radius: radius, acceleration: acceleration)
                    for start in 56...66 {
                        for pattern in DecisionScenarios.BurstPattern.allCases {
                            let scenario = DecisionScenarios.movingThroughBurst(
                                "pull \(acceleration) r\(Int(radius))", path: path,
                                region: region, burstAt: start, burst: burst, pattern: pattern, seed: UInt64(start))
                            var filter = FixFilter()
                            var monitor = RegionMonitor()
                            monitor.insert(region, seq: 1)
                            var lines: [String] = []
                            var got = 0
                            for (i, fix) in scenario.fixes.enumerated() {
                                let truth = Geodesic.distance(path.points[i], region.center)
                                guard case .accepted(let weighted) = filter.evaluate(fix) else { lines.append("\(i) filtered"); continue }
                                let before = monitor.outliers
                                let r0 = monitor.resynchronized
                                let evs = monitor.process(weighted, now: DecisionScenarios.start).events.filter { $0.type == .enter || $0.type == .exit }
                                got += evs.count
                                let d = Geodesic.distance(weighted.coordinate, region.center)
                                if i >= start - 2 && i <= start + burst + 16 {
                                    lines.append("\(i) true=\(String(format: "%.0f", truth)) d=\(String(format: "%.1f", d)) a=\(String(format: "%.1f", weighted.accuracy)) \(i >= start && i < start + burst ? "LIE" : "") \(monitor.outliers > before ? "OUT" : "") \(monitor.resynchronized > r0 ? "RESYNC" : "") \(evs.map { "\($0.type)@\(Int($0.time.timeIntervalSince(DecisionScenarios.start)))" }) refused=\(monitor.vehicleState(of: "truck")?.refused.map { Int($0.time.timeIntervalSince(DecisionScenarios.start)) } ?? [])")
                                }
                            }
                            if got > 2 {
                                print("=== \(scenario.name)")
                                for l in lines { print(l) }
                            }
                        }
                    }
                }
            }
        }
    }
}

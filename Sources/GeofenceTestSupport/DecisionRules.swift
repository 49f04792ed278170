import Foundation
import GeofenceCore

/// The rules geofence is compared with (Docs/events.md), each run over a scenario's fixes per region.
package enum DecisionRule: String, CaseIterable, Sendable {
    /// `d ≤ r`, every fix believed (Tile38, Traccar).
    case naive = "naive d ≤ r (Tile38, Traccar)"
    /// Inside when `d − accuracy < r` (Home Assistant's zones).
    case homeAssistant = "Home Assistant d − acc < r"
    /// Inside when `d ≤ r + accuracy` (OwnTracks).
    case ownTracks = "OwnTracks d ≤ r + acc"
    /// Enter when at least 85 % of the accuracy disc is inside, exit at 15 % or less (Android).
    case android = "Android overlap 85 % / 15 %"
    /// geofence until 2026-12: the band, two conclusive fixes in a row, fixes over 100 m refused.
    case twoConfirmations = "geofence before: band + 2 confirmations, 100 m cap"
    /// geofence now: the band, every fix weighed, outliers judged by the subject's motion.
    case geofence = "geofence: band + motion check"

    /// The `enter`/`exit` events the rule reports for each region of the scenario, in order.
    package func run(_ scenario: DecisionScenario) -> [String: [RegionEventType]] {
        var reported: [String: [RegionEventType]] = [:]
        for region in scenario.regions { reported[region.id] = [] }
        switch self {
        case .geofence:
            var filter = FixFilter()
            var monitor = RegionMonitor()
            for (i, region) in scenario.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
            for fix in scenario.fixes {
                guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
                for event in monitor.process(weighted, now: DecisionScenarios.start).events
                where event.type == .enter || event.type == .exit {
                    reported[event.region, default: []].append(event.type)
                }
            }
        default:
            for region in scenario.regions {
                var state: RegionState = .unknown
                var pending: RegionState?
                var count = 0
                for fix in scenario.fixes {
                    guard let lat = fix.latitude, let lon = fix.longitude else { continue }
                    let accuracy = fix.horizontalAccuracy ?? 25
                    let d = Geodesic.distance(Coordinate(latitude: lat, longitude: lon), region.center)
                    let r = region.radius
                    let says: RegionState?
                    switch self {
                    case .naive: says = d <= r ? .inside : .outside
                    case .homeAssistant: says = d - accuracy < r ? .inside : .outside
                    case .ownTracks: says = d <= r + accuracy ? .inside : .outside
                    case .android:
                        let inside = Self.overlap(distance: d, radius: r, accuracy: accuracy)
                        says = inside >= 0.85 ? .inside : (inside <= 0.15 ? .outside : nil)
                    case .twoConfirmations:
                        guard accuracy <= 100 else { continue }
                        let m = max(5, accuracy)
                        says = d <= r - m ? .inside : (d >= r + m ? .outside : nil)
                    case .geofence: says = nil
                    }
                    if self == .twoConfirmations {
                        guard let says, says != state else {
                            pending = nil
                            count = 0
                            continue
                        }
                        if pending == says { count += 1 } else { (pending, count) = (says, 1) }
                        guard count >= 2 else { continue }
                        pending = nil
                        count = 0
                    }
                    guard let says, says != state else { continue }
                    if state != .unknown { reported[region.id, default: []].append(says == .inside ? .enter : .exit) }
                    state = says
                }
            }
        }
        return reported
    }

    /// The share of a disc of radius `accuracy`, centred `distance` from a circle's centre, inside the
    /// circle of radius `radius` (plane geometry: the discs are small against the earth).
    package static func overlap(distance d: Double, radius r: Double, accuracy a: Double) -> Double {
        guard a > 0 else { return d <= r ? 1 : 0 }
        if d >= r + a { return 0 }
        if d + a <= r { return 1 }
        if d + r <= a { return (r * r) / (a * a) }
        let alpha = acos(max(-1, min(1, (d * d + a * a - r * r) / (2 * d * a))))
        let beta = acos(max(-1, min(1, (d * d + r * r - a * a) / (2 * d * r))))
        let area = a * a * (alpha - sin(2 * alpha) / 2) + r * r * (beta - sin(2 * beta) / 2)
        return area / (.pi * a * a)
    }
}

/// How a rule did on a set of scenarios: crossings it missed, events the paths do not have, and events
/// while parked.
package struct DecisionScore: Sendable, Equatable {
    package var missed = 0
    package var extra = 0
    package var falseWhileParked = 0

    package init() {}

    /// Scores one scenario.
    package mutating func add(_ scenario: DecisionScenario, reported: [String: [RegionEventType]]) {
        for region in scenario.regions {
            let got = reported[region.id] ?? []
            if scenario.parked {
                falseWhileParked += got.count
                continue
            }
            let optional = scenario.optional[region.id]
            let expected = scenario.required[region.id] ?? optional ?? []
            if let optional, got.isEmpty || got == optional { continue }
            let common = Self.commonSubsequence(got, expected)
            missed += expected.count - common
            extra += got.count - common
        }
    }

    static func commonSubsequence(_ a: [RegionEventType], _ b: [RegionEventType]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return 0 }
        var row = Array(repeating: 0, count: b.count + 1)
        for x in a {
            var previous = 0
            for j in 1...b.count {
                let kept = row[j]
                row[j] = x == b[j - 1] ? previous + 1 : max(row[j], row[j - 1])
                previous = kept
            }
        }
        return row[b.count]
    }
}

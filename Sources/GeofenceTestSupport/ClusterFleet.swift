import Foundation
import GeofenceCore

/// A deterministic fleet for the cluster's acceptance runs and the bench (issue 26): `vehicles` vehicles
/// driving at road speeds between a set of circle and polygon regions, parking at some of them (their fixes
/// jittering within the stated accuracy), one fix per vehicle every `interval`, for `rounds` rounds.
///
/// The same configuration gives the same fixes, byte for byte: as gpsd TPV JSON lines with `device` = the
/// vehicle (what `geofence replay` and `run --source json:` read, `writeJSONLines`), and as NATS messages
/// (subject `geofence.fix.VEHICLE`, payload the same line). The regions are a regions file for
/// `geofence import` (`regionsJSON`).
///
/// Fix times start at `start` and advance with the rounds; vehicle `i`'s fixes are `i/vehicles` of an
/// interval after the round's start, so a publisher that sends each fix when its time comes sends an even
/// stream (10,000 vehicles every 10 s: 1,000 fixes a second), and a run of several minutes has crossings
/// throughout. Engines refuse a fix whose time is more than 5 s ahead of their clock, so publish a fix no
/// earlier than its time, and replay the file only once the last fix time has passed.
package struct ClusterFleet: Sendable {
    package struct Configuration: Sendable {
        package var vehicles: Int
        package var seed: UInt64 = 26
        /// Time between a vehicle's fixes.
        package var interval: Duration = .seconds(10)
        /// Fixes per vehicle.
        package var rounds: Int
        /// The first fix time (of vehicle 0).
        package var start: Date
        /// Circle regions (radius 300-900 m, a third with a dwell of 60 s).
        package var circles: Int = 120
        /// Polygon regions (quadrilaterals 500-1,500 m across).
        package var polygons: Int = 20
        /// The middle of the area the fleet drives in.
        package var centre = Coordinate(latitude: 48.85, longitude: 2.35)
        /// Half the side of the square area (metres).
        package var halfSide: Double = 8000

        package init(vehicles: Int, rounds: Int, start: Date) {
            self.vehicles = vehicles
            self.rounds = rounds
            self.start = start
        }
    }

    /// A region of the fleet's area, as the regions file has it.
    package struct Region: Sendable {
        package let id: String
        package let centre: Coordinate
        /// A circle's radius; for a polygon, the radius of the circle its corners lie on.
        package let radius: Double
        /// A polygon's closed ring (first corner repeated last); nil for a circle.
        package let ring: [Coordinate]?
        package let dwell: Bool
    }

    package let configuration: Configuration
    package let regions: [Region]

    package init(_ configuration: Configuration) {
        self.configuration = configuration
        var rng = SeededGenerator(seed: configuration.seed)
        var regions: [Region] = []
        let c = configuration
        for index in 0..<max(0, c.circles) {
            let centre = offset(
                c.centre, north: Double.random(in: -c.halfSide...c.halfSide, using: &rng),
                east: Double.random(in: -c.halfSide...c.halfSide, using: &rng))
            regions.append(
                Region(
                    id: "zone-\(index)", centre: centre, radius: Double.random(in: 300...900, using: &rng).rounded(),
                    ring: nil, dwell: index % 3 == 0))
        }
        for index in 0..<max(0, c.polygons) {
            let centre = offset(
                c.centre, north: Double.random(in: -c.halfSide...c.halfSide, using: &rng),
                east: Double.random(in: -c.halfSide...c.halfSide, using: &rng))
            let radius = Double.random(in: 250...750, using: &rng)
            let turn = Double.random(in: 0..<(Double.pi / 2), using: &rng)
            // Four corners on a circle, unevenly spaced: a convex quadrilateral, counter-clockwise.
            var corners: [Coordinate] = []
            for k in 0..<4 {
                let angle = turn + Double(k) * .pi / 2 + Double.random(in: -0.3...0.3, using: &rng)
                corners.append(offset(centre, north: radius * sin(angle), east: radius * cos(angle)))
            }
            regions.append(
                Region(
                    id: "area-\(index)", centre: centre, radius: radius, ring: corners + [corners[0]],
                    dwell: index % 2 == 0))
        }
        self.regions = regions
    }

    /// Vehicle `index`'s name: `v` and the index, zero-padded (`v00042`); a valid NATS subject token.
    package func vehicle(_ index: Int) -> String {
        let digits = String(index)
        let width = String(max(0, configuration.vehicles - 1)).count
        return "v" + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// Every fix of the run.
    package var fixCount: Int { max(0, configuration.vehicles) * max(0, configuration.rounds) }

    /// The time of the last fix.
    package var end: Date {
        Self.time(round: configuration.rounds - 1, vehicle: configuration.vehicles - 1, configuration)
    }

    /// The regions as a regions file (`{"regions": [...]}`) for `geofence import`: every region notifies
    /// `enter` and `exit`, and those with a dwell also `dwell` after 60 s.
    package var regionsJSON: String {
        var entries: [JSONValue] = []
        for region in regions {
            var o: JSONObject = ["id": .string(region.id)]
            if let ring = region.ring {
                let positions: [JSONValue] = ring.map { .array([.number($0.longitude), .number($0.latitude)]) }
                o["polygon"] = .object(["type": "Polygon", "coordinates": .array([.array(positions)])])
            } else {
                o["lat"] = .number(region.centre.latitude)
                o["lon"] = .number(region.centre.longitude)
                o["radius"] = .number(region.radius)
            }
            if region.dwell {
                o["notify"] = .array(["enter", "exit", "dwell"])
                o["dwell"] = "60s"
            } else {
                o["notify"] = .array(["enter", "exit"])
            }
            entries.append(.object(o))
        }
        return JSONValue.object(["regions": .array(entries)]).serialized()
    }

    /// Writes every fix as a JSON line to `path` (replaced); how many.
    @discardableResult
    package func writeJSONLines(to path: String) throws -> Int {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var buffer = ""
        var count = 0
        for fix in fixes {
            buffer += fix.json
            buffer += "\n"
            count += 1
            if buffer.utf8.count > 1 << 20 {
                try handle.write(contentsOf: Data(buffer.utf8))
                buffer = ""
            }
        }
        try handle.write(contentsOf: Data(buffer.utf8))
        return count
    }

    /// The fixes in time order: round by round, vehicle 0 first in each.
    package var fixes: Fixes { Fixes(fleet: self) }

    static func time(round: Int, vehicle: Int, _ c: Configuration) -> Date {
        let interval = c.interval.components
        let intervalMilliseconds =
            max(1, interval.seconds * 1000 + interval.attoseconds / 1_000_000_000_000_000)
        let phase = Int64(vehicle) * intervalMilliseconds / Int64(max(1, c.vehicles))
        let milliseconds = Int64(round) * intervalMilliseconds + phase
        return c.start.addingTimeInterval(Double(milliseconds) / 1000)
    }

    /// One fix of one vehicle.
    package struct Fix: Sendable {
        package let vehicle: String
        package let time: Date
        package let latitude: Double
        package let longitude: Double
        /// Stated horizontal accuracy (gpsd's `eph`), metres.
        package let accuracy: Double
        package let speed: Double
        package let course: Double

        /// A gpsd TPV report with `device` = the vehicle.
        package var json: String {
            #"{"class":"TPV","device":"\#(vehicle)","mode":3,"time":"\#(TimestampParser.format(time))","lat":\#(latitude),"lon":\#(longitude),"eph":\#(accuracy),"speed":\#(speed),"track":\#(course)}"#
        }

        /// The subject a producer publishes it to.
        package var subject: String { "geofence.fix." + vehicle }

        /// A de-duplication id for the fix stream (`Nats-Msg-Id`): the vehicle and the fix time, so a resend
        /// after a lost acknowledgement is dropped by JetStream.
        package var messageID: String { "fix-\(vehicle)-\(Int64((time.timeIntervalSince1970 * 1000).rounded()))" }
    }

    /// The fixes, generated as they are read (a full run is millions): each time from the start, the same.
    package struct Fixes: Sequence, Sendable {
        let fleet: ClusterFleet

        package func makeIterator() -> Iterator { Iterator(fleet: fleet) }

        package struct Iterator: IteratorProtocol {
            let fleet: ClusterFleet
            var vehicles: [Vehicle]
            var round = 0
            var index = 0

            init(fleet: ClusterFleet) {
                self.fleet = fleet
                let c = fleet.configuration
                vehicles = (0..<Swift.max(0, c.vehicles)).map {
                    Vehicle(index: $0, name: fleet.vehicle($0), fleet: fleet)
                }
            }

            package mutating func next() -> Fix? {
                let c = fleet.configuration
                guard round < c.rounds, !vehicles.isEmpty else { return nil }
                let time = ClusterFleet.time(round: round, vehicle: index, c)
                let fix = vehicles[index].step(round: round, time: time, fleet: fleet)
                index += 1
                if index == vehicles.count {
                    index = 0
                    round += 1
                }
                return fix
            }
        }
    }

    /// One vehicle's motion: drive to a waypoint (a region's middle most often, else anywhere in the area)
    /// at 8-25 m/s, park there for 20 s to 3 min, and on to the next.
    struct Vehicle {
        let name: String
        var rng: SeededGenerator
        /// Metres north and east of the area's middle.
        var north: Double
        var east: Double
        var target: (north: Double, east: Double)
        var speed: Double
        var parkedFor: Double = 0
        var course: Double = 0

        init(index: Int, name: String, fleet: ClusterFleet) {
            self.name = name
            rng = SeededGenerator(seed: fleet.configuration.seed &* 0x9E37_79B9 &+ UInt64(index) &* 0x85EB_CA6B)
            let h = fleet.configuration.halfSide
            north = Double.random(in: -h...h, using: &rng)
            east = Double.random(in: -h...h, using: &rng)
            target = (0, 0)
            speed = 0
            target = nextWaypoint(fleet)
            speed = Double.random(in: 8...25, using: &rng)
        }

        mutating func nextWaypoint(_ fleet: ClusterFleet) -> (north: Double, east: Double) {
            let c = fleet.configuration
            if !fleet.regions.isEmpty, Double.random(in: 0..<1, using: &rng) < 0.7 {
                let region = fleet.regions[Int.random(in: 0..<fleet.regions.count, using: &rng)]
                let (n, e) = Self.local(region.centre, around: c.centre)
                let r = region.radius * 0.4 * Double.random(in: 0...1, using: &rng).squareRoot()
                let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
                return (n + r * cos(bearing), e + r * sin(bearing))
            }
            return (
                Double.random(in: -c.halfSide...c.halfSide, using: &rng),
                Double.random(in: -c.halfSide...c.halfSide, using: &rng)
            )
        }

        /// Metres north and east of `origin` (the inverse of `offset`, near enough for an area of a few km).
        static func local(_ point: Coordinate, around origin: Coordinate) -> (Double, Double) {
            let metresPerDegree = 111_320.0
            return (
                (point.latitude - origin.latitude) * metresPerDegree,
                (point.longitude - origin.longitude) * metresPerDegree * cos(origin.latitude * .pi / 180)
            )
        }

        /// Moves on by one interval (nothing before the first fix) and reports where it is.
        mutating func step(round: Int, time: Date, fleet: ClusterFleet) -> Fix {
            let c = fleet.configuration
            if round > 0 {
                let (seconds, attoseconds) = c.interval.components
                let dt = Double(seconds) + Double(attoseconds) / 1e18
                if parkedFor > 0 {
                    parkedFor -= dt
                    if parkedFor <= 0 {
                        target = nextWaypoint(fleet)
                        speed = Double.random(in: 8...25, using: &rng)
                    }
                } else {
                    let dn = target.north - north
                    let de = target.east - east
                    let distance = (dn * dn + de * de).squareRoot()
                    let travel = speed * dt
                    if distance <= travel {
                        north = target.north
                        east = target.east
                        parkedFor = Double.random(in: 20...180, using: &rng)
                    } else {
                        north += dn / distance * travel
                        east += de / distance * travel
                        course = (atan2(de, dn) * 180 / .pi + 360).truncatingRemainder(dividingBy: 360)
                    }
                }
            }
            let moving = parkedFor <= 0
            // The stated accuracy, and an error within 90 % of it in any direction (parked: the jitter).
            let accuracy = (Double.random(in: 3...10, using: &rng) * 10).rounded() / 10
            let error = accuracy * 0.9 * Double.random(in: 0...1, using: &rng).squareRoot()
            let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
            let truth = offset(c.centre, north: north, east: east)
            let p = offset(truth, north: error * cos(bearing), east: error * sin(bearing))
            return Fix(
                vehicle: name, time: time, latitude: (p.latitude * 1e7).rounded() / 1e7,
                longitude: (p.longitude * 1e7).rounded() / 1e7, accuracy: accuracy,
                speed: moving ? (speed * 10).rounded() / 10 : 0, course: (course * 10).rounded() / 10)
        }
    }
}

/// The partition the servers' subject mapping `{{partition(P,1)}}` gives a vehicle: FNV-1a (32 bits) of its
/// name, modulo P (nats-server's subject transform; `NATSMappingTests` checks it against the servers).
package enum NATSPartition {
    package static func of(_ vehicle: String, partitions: Int) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in vehicle.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return Int(hash % UInt32(max(1, partitions)))
    }
}

import Foundation
import GeofenceCore

/// A small, fast, seedable random generator (SplitMix64), so synthetic scenarios are the same on every run.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Moves a coordinate by metres north and east on the local tangent plane of the WGS84 ellipsoid.
///
/// Good to a few centimetres over a few kilometres: scenario builders use it to place points, and tests
/// measure what matters with the exact geodesic.
package func offset(_ c: Coordinate, north: Double, east: Double) -> Coordinate {
    let a = 6_378_137.0
    let f = 1 / 298.257223563
    let e2 = f * (2 - f)
    let phi = c.latitude * .pi / 180
    let w = (1 - e2 * sin(phi) * sin(phi)).squareRoot()
    let meridian = a * (1 - e2) / (w * w * w)
    let primeVertical = a / w
    var lat = c.latitude + north / meridian * 180 / .pi
    var lon = c.longitude + east / (primeVertical * cos(phi)) * 180 / .pi
    if lat > 90 { lat = 180 - lat }
    if lat < -90 { lat = -180 - lat }
    if lon > 180 { lon -= 360 }
    if lon < -180 { lon += 360 }
    return Coordinate(latitude: lat, longitude: lon)
}

/// Builds synthetic receiver output: fixes along a path, with errors drawn within their stated accuracy.
package struct SyntheticReceiver {
    package var subject: String
    package var rng: SeededGenerator
    package var time: Date
    /// Seconds between fixes.
    package var interval: Double = 1
    /// Stated accuracy is drawn from this range (metres).
    package var accuracy: ClosedRange<Double> = 3...12
    /// Actual error as a fraction of the stated accuracy, at most.
    package var errorFraction: Double = 0.95

    package init(subject: String = "/dev/ttyACM0", seed: UInt64, start: Date) {
        self.subject = subject
        self.rng = SeededGenerator(seed: seed)
        self.time = start
    }

    /// One fix whose true position is `truth`, with an error inside its stated accuracy.
    package mutating func fix(at truth: Coordinate) -> Fix {
        let stated = Double.random(in: accuracy, using: &rng)
        let error = stated * errorFraction * Double.random(in: 0...1, using: &rng).squareRoot()
        return make(truth: truth, error: error, stated: stated)
    }

    /// A lying fix: far from the truth, yet claiming to be accurate.
    package mutating func outlier(at truth: Coordinate, error: Double, stated: Double) -> Fix {
        make(truth: truth, error: error, stated: stated)
    }

    private mutating func make(truth: Coordinate, error: Double, stated: Double) -> Fix {
        let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
        let p = offset(truth, north: error * cos(bearing), east: error * sin(bearing))
        let fix = Fix(
            subject: subject, time: time, mode: .threeD, latitude: p.latitude, longitude: p.longitude,
            horizontalAccuracy: stated)
        time = time.addingTimeInterval(interval)
        return fix
    }
}

/// Parses and range-checks latitudes and longitudes given as text (WGS84 degrees).
package enum CoordinateParser {
    /// Parses a latitude in degrees and checks it is within [-90, 90].
    package static func latitude(_ text: String) throws(ValueError) -> Double {
        let value = try NumberParser.finite(text)
        try validateLatitude(value)
        return value
    }

    /// Parses a longitude in degrees and checks it is within [-180, 180].
    package static func longitude(_ text: String) throws(ValueError) -> Double {
        let value = try NumberParser.finite(text)
        try validateLongitude(value)
        return value
    }

    /// Parses `LAT,LON` (`51.5007,-0.1246`) into a coordinate.
    package static func coordinate(_ text: String) throws(ValueError) -> Coordinate {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw ValueError("'\(text)' is not a coordinate; expected LAT,LON like 51.5007,-0.1246")
        }
        return Coordinate(latitude: try latitude(String(parts[0])), longitude: try longitude(String(parts[1])))
    }

    /// Throws unless `value` is a finite latitude within [-90, 90], naming the violated bound.
    package static func validateLatitude(_ value: Double) throws(ValueError) {
        try validate(value, name: "latitude", limit: 90)
    }

    /// Throws unless `value` is a finite longitude within [-180, 180], naming the violated bound.
    package static func validateLongitude(_ value: Double) throws(ValueError) {
        try validate(value, name: "longitude", limit: 180)
    }

    private static func validate(_ value: Double, name: String, limit: Double) throws(ValueError) {
        guard value.isFinite else {
            throw ValueError("\(name) \(value) is not a finite number")
        }
        let bounds = "must be between \(displayNumber(-limit)) and \(displayNumber(limit))"
        if value < -limit || value > limit {
            throw ValueError("\(name) \(displayNumber(value)) is out of range: \(bounds)")
        }
    }
}

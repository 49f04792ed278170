/// A point on the WGS84 ellipsoid, in degrees.
public struct Coordinate: Hashable, Sendable {
    /// Degrees north of the equator, -90 to 90 (south is negative).
    public var latitude: Double
    /// Degrees east of Greenwich, -180 to 180 (west is negative).
    public var longitude: Double

    /// A point, unchecked: `isValid` says whether it is one (a `Region` refuses a centre that is not).
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// True when both values are finite and within [-90, 90] and [-180, 180].
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && abs(latitude) <= 90 && abs(longitude) <= 180
    }
}

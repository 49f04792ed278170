import Foundation

/// Regions as GeoJSON (RFC 7946): a polygon region's `polygon` field is a GeoJSON `Polygon` or
/// `MultiPolygon` geometry, `import` reads FeatureCollections, and `export --format geojson` writes one
/// (Docs/regions-format.md).
package enum RegionGeoJSON {
    /// Vertices of the polygon a circle is drawn as in an export (the circle itself is in its properties).
    package static let circleVertices = 64

    /// The geometry of a polygon: a `Polygon` for one part, a `MultiPolygon` for several; positions are
    /// `[longitude, latitude]`, as GeoJSON orders them.
    package static func geometry(_ polygon: RegionPolygon) -> JSONValue {
        func ring(_ r: [Coordinate]) -> JSONValue {
            .array(r.map { .array([.number($0.longitude), .number($0.latitude)]) })
        }
        func part(_ rings: [[Coordinate]]) -> JSONValue { .array(rings.map(ring)) }
        if polygon.parts.count == 1 {
            return .object(["type": "Polygon", "coordinates": part(polygon.parts[0])])
        }
        return .object(["type": "MultiPolygon", "coordinates": .array(polygon.parts.map(part))])
    }

    /// The polygon of a GeoJSON `Polygon` or `MultiPolygon` geometry, or of a `Feature` holding one. Errors
    /// name the field `polygon`.
    package static func polygon(from value: JSONValue, limits: RegionLimits = .default) throws(RegionValidationError)
        -> RegionPolygon
    {
        func fail(_ message: String) -> RegionValidationError {
            RegionValidationError(field: "polygon", message: message)
        }
        guard case .object(var object) = value else {
            throw fail("must be a GeoJSON Polygon or MultiPolygon object, not \(RegionJSON.describe(value))")
        }
        if object["type"]?.stringValue == "Feature" {
            guard case .object(let geometry)? = object["geometry"] else {
                throw fail("the Feature has no geometry object")
            }
            object = geometry
        }
        guard let type = object["type"]?.stringValue else { throw fail("has no \"type\"") }
        guard let coordinates = object["coordinates"]?.arrayValue else {
            throw fail("has no \"coordinates\" array")
        }
        func position(_ v: JSONValue, _ place: String) throws(RegionValidationError) -> Coordinate {
            guard let items = v.arrayValue, items.count >= 2, let lon = items[0].doubleValue,
                let lat = items[1].doubleValue
            else { throw fail("\(place) must be a position [longitude, latitude]") }
            return Coordinate(latitude: lat, longitude: lon)
        }
        func rings(_ v: JSONValue, _ place: String) throws(RegionValidationError) -> [[Coordinate]] {
            guard let items = v.arrayValue, !items.isEmpty else { throw fail("\(place) must be an array of rings") }
            var out: [[Coordinate]] = []
            for (r, ringValue) in items.enumerated() {
                guard let positions = ringValue.arrayValue else {
                    throw fail("\(place) ring \(r) must be an array of positions")
                }
                var ring: [Coordinate] = []
                ring.reserveCapacity(positions.count)
                for (i, p) in positions.enumerated() {
                    ring.append(try position(p, "\(place) ring \(r) position \(i)"))
                }
                out.append(ring)
            }
            return out
        }
        switch type {
        case "Polygon":
            return try RegionPolygon(parts: [rings(.array(coordinates), "Polygon")], limits: limits)
        case "MultiPolygon":
            var parts: [[[Coordinate]]] = []
            for (p, part) in coordinates.enumerated() { parts.append(try rings(part, "MultiPolygon part \(p)")) }
            return try RegionPolygon(parts: parts, limits: limits)
        default:
            throw fail("is a GeoJSON \(type): only Polygon and MultiPolygon are regions (a circle is lat, lon, radius)")
        }
    }

    /// A polygon from the command line's `'lat,lon lat,lon ...'` (closed for you when the last position is
    /// not the first).
    package static func polygon(fromPositions text: String, limits: RegionLimits = .default)
        throws(RegionValidationError) -> RegionPolygon
    {
        var ring: [Coordinate] = []
        for (i, word) in text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).enumerated() {
            let numbers = word.split(separator: ",", omittingEmptySubsequences: false)
            guard numbers.count == 2, let lat = Double(numbers[0]), let lon = Double(numbers[1]) else {
                throw RegionValidationError(
                    field: "polygon", message: "position \(i) \"\(word)\" is not lat,lon (such as 51.5007,-0.1246)")
            }
            ring.append(Coordinate(latitude: lat, longitude: lon))
        }
        if let first = ring.first, ring.count >= 3, ring.last != first { ring.append(first) }
        return try RegionPolygon(parts: [[ring]], limits: limits)
    }

    /// The ring a circle is drawn as: `circleVertices` points at its radius (on a sphere of the local radius
    /// of curvature: within a few centimetres of the geodesic circle at 500 km), counterclockwise.
    package static func circleRing(center: Coordinate, radius: Double) -> [Coordinate] {
        let lat = center.latitude * .pi / 180
        let lon = center.longitude * .pi / 180
        let e2 = WGS84.eccentricitySquared
        let w = 1 - e2 * sin(lat) * sin(lat)
        let localRadius = (WGS84.equatorialRadius * (1 - e2) / pow(w, 1.5) * WGS84.equatorialRadius / w.squareRoot())
            .squareRoot()
        let delta = radius / localRadius
        var ring: [Coordinate] = []
        for k in 0..<circleVertices {
            let bearing = -2 * Double.pi * Double(k) / Double(circleVertices)
            let lat2 = asin(sin(lat) * cos(delta) + cos(lat) * sin(delta) * cos(bearing))
            let lon2 = lon + atan2(sin(bearing) * sin(delta) * cos(lat), cos(delta) - sin(lat) * sin(lat2))
            var degrees = lon2 * 180 / .pi
            if degrees > 180 { degrees -= 360 }
            if degrees < -180 { degrees += 360 }
            ring.append(Coordinate(latitude: lat2 * 180 / .pi, longitude: degrees))
        }
        ring.append(ring[0])
        return ring
    }

    /// A region (as `list --json` or the regions file write it) as a GeoJSON Feature: a polygon as itself,
    /// a circle as a polygon of `circleVertices` with `circle: {lat, lon, radius}` in its properties (which
    /// `import` reads back as the circle). Every other field is a property.
    package static func feature(_ region: JSONObject) -> JSONObject {
        var properties = region
        let geometry: JSONValue
        if let polygon = region["polygon"], !polygon.isNull {
            geometry = polygon
            for key in ["polygon", "lat", "lon", "radius"] { properties[key] = nil }
        } else {
            let lat = region["lat"]?.doubleValue ?? .nan
            let lon = region["lon"]?.doubleValue ?? .nan
            let radius = region["radius"]?.doubleValue ?? .nan
            let ring = circleRing(center: Coordinate(latitude: lat, longitude: lon), radius: radius)
            geometry = .object([
                "type": "Polygon",
                "coordinates": .array([.array(ring.map { .array([.number($0.longitude), .number($0.latitude)]) })]),
            ])
            for key in ["lat", "lon", "radius"] { properties[key] = nil }
            properties["circle"] = .object(["lat": .number(lat), "lon": .number(lon), "radius": .number(radius)])
        }
        return [
            "type": "Feature", "id": region["id"] ?? .null, "geometry": geometry, "properties": .object(properties),
        ]
    }

    /// The region object a Feature of an imported FeatureCollection stands for: its properties, the feature's
    /// `id` when the properties have none, and its geometry as `polygon` (or, with a `circle` property, that
    /// circle's `lat`, `lon` and `radius`; or a `Point` with a `radius` property, that circle). Errors name
    /// the member at fault.
    package static func regionObject(fromFeature value: JSONValue) throws(RegionValidationError) -> JSONValue {
        guard case .object(let feature) = value, feature["type"]?.stringValue == "Feature" else {
            throw RegionValidationError(field: "(entry)", message: "must be a GeoJSON Feature object")
        }
        var object = JSONObject()
        if let properties = feature["properties"], !properties.isNull {
            guard case .object(let map) = properties else {
                throw RegionValidationError(field: "properties", message: "must be an object")
            }
            object = map
        }
        if object["id"] == nil, let id = feature["id"], !id.isNull { object["id"] = id }
        if let circle = object["circle"] {
            guard case .object(let c) = circle else {
                throw RegionValidationError(field: "properties.circle", message: "must be {lat, lon, radius}")
            }
            object["circle"] = nil
            for key in ["lat", "lon", "radius"] { object[key] = c[key] }
        } else {
            guard let geometry = feature["geometry"], !geometry.isNull else {
                throw RegionValidationError(field: "geometry", message: "is missing")
            }
            if geometry["type"]?.stringValue == "Point", object["radius"] != nil {
                // A circle as a Point with a radius property (how geofence exported circles before polygons).
                guard let position = geometry["coordinates"]?.arrayValue, position.count >= 2 else {
                    throw RegionValidationError(field: "geometry", message: "the Point has no [longitude, latitude]")
                }
                object["lon"] = position[0]
                object["lat"] = position[1]
            } else {
                object["polygon"] = geometry
            }
        }
        return .object(object)
    }
}

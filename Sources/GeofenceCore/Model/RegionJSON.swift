import Foundation

/// The regions file format (`{"regions": [...]}`) and the region object of `list --json`, in both directions.
///
/// Documented field by field in Docs/regions-format.md.
package enum RegionJSON {
    /// Fields that `list --json` and `show --json` add; accepted and ignored on import, so that a listing
    /// can be fed back in.
    package static let outputOnlyFields: Set<String> = [
        "status", "reason", "attempts", "nextRetry", "createdAt", "createdBy", "updatedAt", "states", "vertices",
        "area",
    ]
    package static let fields: Set<String> = [
        "id", "name", "lat", "lon", "radius", "notify", "dwell", "expires", "hooks", "subjects", "polygon",
    ]

    /// Whether a key belongs to `fields` or `outputOnlyFields` (a switch: hashing every key of a million
    /// entries into a `Set` showed in an import's profile).
    package static func isKnownField(_ key: String) -> Bool {
        switch key {
        case "id", "name", "lat", "lon", "radius", "notify", "dwell", "expires", "hooks", "subjects", "polygon": true
        case "status", "reason", "attempts", "nextRetry", "createdAt", "createdBy", "updatedAt", "states": true
        case "vertices", "area": true
        default: false
        }
    }

    /// One region from its JSON object. `now` resolves relative expiry (`"expires": "30d"`).
    /// Errors name the field; the caller adds the entry's position.
    package static func decode(
        _ value: JSONValue, now: Date, createdBy: UInt32? = nil, limits: RegionLimits = .default
    ) throws(RegionValidationError) -> Region {
        guard case .object(let object) = value else {
            throw RegionValidationError(field: "(entry)", message: "must be an object, not \(describe(value))")
        }
        for key in object.keys where !isKnownField(key) {
            throw RegionValidationError(field: key, message: "is not a known field")
        }
        guard let idValue = object["id"] else { throw RegionValidationError(field: "id", message: "is missing") }
        guard case .string(let id) = idValue else {
            throw RegionValidationError(field: "id", message: "must be a string, not \(describe(idValue))")
        }
        let name = try optionalString(object, "name")
        // A polygon region: its `lat`, `lon` and `radius` (its bounding cap, as `export` writes them) are
        // derived from the polygon, so they are not needed, and ignored when given.
        var polygon: RegionPolygon?
        if let value = object["polygon"], !value.isNull {
            polygon = try RegionGeoJSON.polygon(from: value, limits: limits)
        }
        let lat: Double
        let lon: Double
        let radius: Double
        if let polygon {
            (lat, lon, radius) = (polygon.center.latitude, polygon.center.longitude, polygon.capRadius)
        } else {
            lat = try number(object, "lat")
            lon = try number(object, "lon")
            radius = try number(object, "radius")
        }

        var notify: Set<NotifyKind>?
        if let value = object["notify"], !value.isNull {
            guard case .array(let items) = value else {
                throw RegionValidationError(field: "notify", message: "must be an array of strings")
            }
            var kinds = Set<NotifyKind>()
            for (i, item) in items.enumerated() {
                guard case .string(let text) = item, let kind = NotifyKind(rawValue: text) else {
                    throw RegionValidationError(
                        field: "notify[\(i)]", message: "must be one of enter, exit, dwell, not \(describe(item))")
                }
                kinds.insert(kind)
            }
            notify = kinds
        }

        var dwell: Double?
        if let value = object["dwell"], !value.isNull {
            switch value {
            case .string(let text):
                do { dwell = try DurationParser.parse(text) } catch {
                    throw RegionValidationError(field: "dwell", message: error.message)
                }
            case .number(let seconds): dwell = seconds
            default: throw RegionValidationError(field: "dwell", message: "must be a duration such as \"5m\"")
            }
        }

        var expires: Date?
        if let value = object["expires"], !value.isNull {
            guard case .string(let text) = value else {
                throw RegionValidationError(
                    field: "expires", message: "must be a timestamp such as \"2027-01-01T00:00:00Z\" or a duration")
            }
            do { expires = try ExpiryParser.parse(text, now: now) } catch {
                throw RegionValidationError(field: "expires", message: error.message)
            }
        }

        var hooks: [NotifyKind: String] = [:]
        if let value = object["hooks"], !value.isNull {
            guard case .object(let map) = value else {
                throw RegionValidationError(field: "hooks", message: "must be an object of event: command")
            }
            for (key, command) in map {
                guard let kind = NotifyKind(rawValue: key) else {
                    throw RegionValidationError(field: "hooks.\(key)", message: "must be one of enter, exit, dwell")
                }
                guard case .string(let text) = command else {
                    throw RegionValidationError(field: "hooks.\(key)", message: "must be a string")
                }
                hooks[kind] = text
            }
        }

        var subjects: [String]?
        if let value = object["subjects"], !value.isNull {
            guard case .array(let items) = value else {
                throw RegionValidationError(field: "subjects", message: "must be an array of strings")
            }
            subjects = try items.enumerated().map { (i, item) throws(RegionValidationError) in
                guard case .string(let s) = item else {
                    throw RegionValidationError(field: "subjects[\(i)]", message: "must be a string")
                }
                return s
            }
        }

        return try Region(
            id: id, name: name, center: Coordinate(latitude: lat, longitude: lon), radius: radius, notify: notify,
            dwell: dwell, expires: expires, hooks: hooks, subjects: subjects, createdBy: createdBy, createdAt: now,
            polygon: polygon, limits: limits)
    }

    /// The definition as the import format spells it (what `export` writes).
    package static func encode(_ region: Region) -> JSONObject {
        var o: JSONObject = ["id": .string(region.id)]
        if let name = region.name { o["name"] = .string(name) }
        o["lat"] = .number(region.center.latitude)
        o["lon"] = .number(region.center.longitude)
        o["radius"] = .number(region.radius)
        o["notify"] = .array(region.notify.sorted().map { .string($0.rawValue) })
        if let dwell = region.dwell { o["dwell"] = .string(DurationParser.format(dwell)) }
        if let expires = region.expires { o["expires"] = .string(formatWhole(expires)) }
        if !region.hooks.isEmpty {
            var hooks = JSONObject()
            for kind in NotifyKind.allCases {
                if let command = region.hooks[kind] { hooks[kind.rawValue] = .string(command) }
            }
            o["hooks"] = .object(hooks)
        }
        if let subjects = region.subjects { o["subjects"] = .array(subjects.map { .string($0) }) }
        if let polygon = region.polygon { o["polygon"] = RegionGeoJSON.geometry(polygon) }
        return o
    }

    /// A timestamp without the fraction when it has none: `2027-01-01T00:00:00Z`, as people write them.
    static func formatWhole(_ date: Date) -> String {
        let text = TimestampParser.format(date)
        return text.hasSuffix(".000Z") ? String(text.dropLast(5)) + "Z" : text
    }

    /// Parses a whole regions file: either `{"regions": [...]}` or a bare array (or a GeoJSON
    /// FeatureCollection, or an OwnTracks `.otrw` waypoints file). Every entry is checked;
    /// all problems are returned (not just the first), each with its position, and nothing is half-done.
    package static func decodeFile(
        _ bytes: [UInt8], now: Date, createdBy: UInt32? = nil, limits: RegionLimits = .default
    ) -> Result<[Region], RegionFileError> {
        let root: JSONValue
        do { root = try JSON.parse(bytes) } catch {
            return .failure(RegionFileError(problems: ["not valid JSON: \(error)"]))
        }
        let entries: [JSONValue]
        switch root {
        case .array(let items): entries = items
        case .object(let object) where object["type"]?.stringValue == "FeatureCollection":
            // GeoJSON: each Feature is a region, its properties the region's fields (Docs/regions-format.md).
            guard case .array(let features)? = object["features"] else {
                return .failure(RegionFileError(problems: ["the FeatureCollection has no \"features\" array"]))
            }
            var decoder = RegionEntryDecoder(now: now, createdBy: createdBy, limits: limits)
            decoder.label = "features"
            decoder.add(features, converting: RegionGeoJSON.regionObject(fromFeature:))
            return decoder.result
        case .object(let object) where object["_type"]?.stringValue == "waypoints":
            // An OwnTracks `.otrw` file: each waypoint is a region (`OwnTracksWaypoints`).
            guard case .array(let items)? = object["waypoints"] else {
                return .failure(RegionFileError(problems: ["the OwnTracks waypoints file has no \"waypoints\" array"]))
            }
            var decoder = RegionEntryDecoder(now: now, createdBy: createdBy, limits: limits)
            decoder.label = "waypoints"
            decoder.fieldNames = OwnTracksWaypoints.fieldNames
            decoder.add(items, converting: OwnTracksWaypoints.regionObject(fromFileEntry:))
            return decoder.result
        case .object(let object):
            guard let list = object["regions"] else {
                return .failure(RegionFileError(problems: ["the top-level object has no \"regions\" array"]))
            }
            guard case .array(let items) = list else {
                return .failure(RegionFileError(problems: ["\"regions\" must be an array, not \(describe(list))"]))
            }
            entries = items
        default:
            return .failure(
                RegionFileError(problems: ["the file must hold {\"regions\": [...]}, not \(describe(root))"]))
        }
        return decodeEntries(entries, now: now, createdBy: createdBy, limits: limits)
    }

    /// Checks a list of region objects (the `regions` array of a file): every problem, with its position.
    package static func decodeEntries(
        _ entries: [JSONValue], now: Date, createdBy: UInt32? = nil, limits: RegionLimits = .default
    ) -> Result<[Region], RegionFileError> {
        var decoder = RegionEntryDecoder(now: now, createdBy: createdBy, limits: limits)
        decoder.add(entries)
        return decoder.result
    }

    private static func number(_ object: JSONObject, _ field: String) throws(RegionValidationError) -> Double {
        guard let value = object[field] else { throw RegionValidationError(field: field, message: "is missing") }
        guard case .number(let n) = value else {
            throw RegionValidationError(field: field, message: "must be a number, not \(describe(value))")
        }
        return n
    }

    private static func optionalString(_ object: JSONObject, _ field: String) throws(RegionValidationError)
        -> String?
    {
        guard let value = object[field], !value.isNull else { return nil }
        guard case .string(let s) = value else {
            throw RegionValidationError(field: field, message: "must be a string, not \(describe(value))")
        }
        return s
    }

    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// Everything wrong with a regions file, one line per problem.
package struct RegionFileError: Error, Sendable, Equatable, CustomStringConvertible {
    package var problems: [String]

    package init(problems: [String]) { self.problems = problems }

    package var description: String { problems.joined(separator: "\n") }
}

/// Checks the entries of one regions array given in parts (an import sent to the engine over several
/// requests), as `RegionJSON.decodeEntries` checks them whole: positions count from the first part, and an
/// id repeated across parts is found.
package struct RegionEntryDecoder: Sendable {
    package let now: Date
    package let createdBy: UInt32?
    package let limits: RegionLimits
    package private(set) var regions: [Region] = []
    package private(set) var problems: [String] = []
    /// Entries seen so far, good or bad.
    package private(set) var count = 0
    private var seen: [String: Int] = [:]
    /// What problems call the list: `regions` (a regions file) or `features` (a GeoJSON FeatureCollection).
    package var label = "regions"
    /// Fields a problem names as its entry spells them (an OwnTracks waypoint's `rad` for `radius`).
    package var fieldNames: [String: String] = [:]

    package init(now: Date, createdBy: UInt32? = nil, limits: RegionLimits = .default) {
        self.now = now
        self.createdBy = createdBy
        self.limits = limits
    }

    package mutating func add(_ entries: [JSONValue]) {
        add(entries) { value throws(RegionValidationError) in value }
    }

    /// The same, each entry first turned into a region object (a GeoJSON Feature into its region's fields).
    package mutating func add(
        _ entries: [JSONValue], converting convert: (JSONValue) throws(RegionValidationError) -> JSONValue
    ) {
        // Only once: reserving the exact size for every part would copy the whole array each time.
        if regions.isEmpty {
            regions.reserveCapacity(entries.count)
            seen.reserveCapacity(entries.count)
        }
        for entry in entries {
            let i = count
            count += 1
            do {
                let region = try RegionJSON.decode(convert(entry), now: now, createdBy: createdBy, limits: limits)
                if let first = seen[region.id] {
                    problems.append("\(label)[\(i)].id: \"\(region.id)\" repeats the id of \(label)[\(first)]")
                } else {
                    seen[region.id] = i
                    regions.append(region)
                }
            } catch {
                let object = entry.objectValue
                let id = object?["id"]?.stringValue ?? object?["properties"]?.objectValue?["id"]?.stringValue
                let idHint = id.map { " (id \"\($0)\")" } ?? ""
                problems.append("\(label)[\(i)].\(fieldNames[error.field] ?? error.field)\(idHint): \(error.message)")
            }
        }
    }

    /// The good regions decoded since the last call, handed over (so one storing them part by part does not
    /// also keep them all here); `result` then holds only those not taken.
    package mutating func takeRegions() -> [Region] {
        defer { regions = [] }
        return regions
    }

    /// Every region not taken, or every problem.
    package var result: Result<[Region], RegionFileError> {
        problems.isEmpty ? .success(regions) : .failure(RegionFileError(problems: problems))
    }
}

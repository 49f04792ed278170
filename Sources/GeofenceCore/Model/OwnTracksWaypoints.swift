import Foundation

/// OwnTracks waypoints (the regions a phone defines, https://owntracks.org/booklet/features/waypoints/) as
/// geofence regions: one `{"_type":"waypoint",...}` (`owntracks/USER/DEVICE/waypoint`), a device's whole
/// list `{"_type":"waypoints","waypoints":[...]}` (`.../waypoints`), and the `.otrw` file the apps export,
/// which is such a list.
///
/// A waypoint's key is its `tst`, the time it was created, which the apps keep when it is edited: the region
/// of a vehicle's waypoint is `owntracks/USER/DEVICE/TST` (`regionID`), so a waypoint sent again replaces its
/// region rather than adding one, and its `tst` comes back as a transition's `wtst`. Its `desc` is the
/// region's name, `rad` its radius, and the region applies to that vehicle only (`subjects`). Each region is
/// then checked as any other (`RegionJSON.decode`): the same limits, the same errors.
///
/// OwnTracks has no deletion message: a waypoint whose `lat` or `lon` is out of range is how its remote
/// commands delete one, and a waypoint of `rad` 0 is no geofence; both remove the region of that `tst`
/// (`Entry.remove`). A `waypoints` list is the device's whole set: its regions not in it are removed.
package enum OwnTracksWaypoints {
    /// A region's fields as a waypoint spells them, for problems.
    package static let fieldNames = ["radius": "rad", "name": "desc", "subjects[0]": "(vehicle)"]

    /// The start of every waypoint region's id.
    package static let prefix = "owntracks/"

    /// The region id of the waypoint created at `tst`: of the vehicle `subject`, or (a file, no vehicle)
    /// `owntracks/TST`.
    package static func regionID(tst: Int, subject: String?) -> String {
        subject.map { prefix + $0 + "/" + String(tst) } ?? prefix + String(tst)
    }

    /// The start of the ids of every waypoint region of `subject`.
    package static func idPrefix(subject: String) -> String { prefix + subject + "/" }

    /// The waypoint's creation time (its `tst`, a transition's `wtst`) from a region id made by `regionID`;
    /// nil for any other id.
    package static func creationTime(regionID id: String) -> Int? {
        guard id.hasPrefix(prefix), let slash = id.lastIndex(of: "/") else { return nil }
        let digits = id[id.index(after: slash)...]
        guard !digits.isEmpty, digits.count <= 12, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let tst = Int(digits), tst > 0
        else { return nil }
        return tst
    }

    /// What one waypoint says.
    package enum Entry: Sendable, Equatable {
        /// The region it defines (or redefines).
        case define(Region)
        /// The region of this id is to go: its waypoint was deleted (`lat`/`lon` out of range) or has no
        /// geofence (`rad` 0).
        case remove(id: String, reason: String)

        package var regionID: String {
            switch self {
            case .define(let region): region.id
            case .remove(let id, _): id
            }
        }
    }

    /// One message's worth: the vehicle, its entries, and whether it is the device's whole list (`waypoints`).
    package struct Update: Sendable, Equatable {
        package var subject: String
        package var entries: [Entry]
        package var wholeList: Bool
    }

    /// Whether an OwnTracks payload is a waypoint or a list of them (before it is decoded whole).
    package static func isWaypoints(_ object: JSONValue) -> Bool {
        let type = object["_type"]?.stringValue
        return type == "waypoint" || type == "waypoints"
    }

    /// A `waypoint` or `waypoints` message of the vehicle `subject`: every entry checked, and the first
    /// problem named by its field (`waypoints[2].rad: ...`) so that a bad message changes nothing.
    package static func decodeMessage(_ object: JSONValue, subject: String, now: Date) throws(RegionValidationError)
        -> Update
    {
        switch object["_type"]?.stringValue {
        case "waypoint":
            return Update(subject: subject, entries: [try entry(object, subject: subject, now: now)], wholeList: false)
        case "waypoints":
            let items = try list(object)
            var entries: [Entry] = []
            var seen: [String: Int] = [:]
            for (i, item) in items.enumerated() {
                let decoded: Entry
                do { decoded = try entry(item, subject: subject, now: now) } catch {
                    throw RegionValidationError(field: "waypoints[\(i)].\(error.field)", message: error.message)
                }
                if let first = seen[decoded.regionID] {
                    throw RegionValidationError(
                        field: "waypoints[\(i)].tst", message: "repeats the tst of waypoints[\(first)]")
                }
                seen[decoded.regionID] = i
                entries.append(decoded)
            }
            return Update(subject: subject, entries: entries, wholeList: true)
        default:
            throw RegionValidationError(field: "_type", message: "is not waypoint or waypoints")
        }
    }

    /// The `waypoints` array of a list.
    package static func list(_ object: JSONValue) throws(RegionValidationError) -> [JSONValue] {
        guard let value = object["waypoints"] else {
            throw RegionValidationError(field: "waypoints", message: "is missing")
        }
        guard case .array(let items) = value else {
            throw RegionValidationError(
                field: "waypoints", message: "must be an array, not \(RegionJSON.describe(value))")
        }
        return items
    }

    /// A waypoint of an `.otrw` file as the region object of a regions file (`RegionEntryDecoder` checks it
    /// and names its problems): `owntracks/TST`, for every vehicle. A deleted waypoint or one without a
    /// geofence is refused, since a file has nothing to remove.
    package static func regionObject(fromFileEntry value: JSONValue) throws(RegionValidationError) -> JSONValue {
        let fields = try waypointFields(value, subject: nil)
        if let removal = fields.removal { throw RegionValidationError(field: removal.field, message: removal.message) }
        return .object(fields.region)
    }

    /// One waypoint of the vehicle `subject`.
    package static func entry(_ value: JSONValue, subject: String, now: Date) throws(RegionValidationError) -> Entry {
        let fields = try waypointFields(value, subject: subject)
        let id = regionID(tst: fields.tst, subject: subject)
        if let removal = fields.removal { return .remove(id: id, reason: removal.message) }
        return .define(try region(fields.region, now: now))
    }

    /// The region of a waypoint's region object, checked as any region; a problem named as the waypoint
    /// spells the field.
    private static func region(_ object: JSONObject, now: Date) throws(RegionValidationError) -> Region {
        do {
            return try RegionJSON.decode(.object(object), now: now)
        } catch {
            throw RegionValidationError(field: fieldNames[error.field] ?? error.field, message: error.message)
        }
    }

    /// The region object of a waypoint, or why it removes its region instead; and its `tst`.
    private static func waypointFields(_ value: JSONValue, subject: String?) throws(RegionValidationError) -> (
        region: JSONObject, tst: Int, removal: RegionValidationError?
    ) {
        guard case .object(let object) = value else {
            throw RegionValidationError(
                field: "(entry)", message: "must be an object, not \(RegionJSON.describe(value))")
        }
        if let type = object["_type"], type.stringValue != "waypoint" {
            throw RegionValidationError(field: "_type", message: "must be \"waypoint\"")
        }
        guard let tstValue = try number(object, "tst") else {
            throw RegionValidationError(field: "tst", message: "is missing: it is the waypoint's key")
        }
        // Its creation time, in whole Unix seconds from 1970 to the year 9999: an integer before it is an `Int`.
        guard tstValue > 0, tstValue < 253_402_300_800, tstValue.rounded(.towardZero) == tstValue else {
            throw RegionValidationError(
                field: "tst",
                message: "\(Region.show(tstValue)) is not a Unix time in whole seconds from 1970 to the year 9999")
        }
        let tst = Int(tstValue)
        guard let lat = try number(object, "lat") else {
            throw RegionValidationError(field: "lat", message: "is missing")
        }
        guard let lon = try number(object, "lon") else {
            throw RegionValidationError(field: "lon", message: "is missing")
        }
        let rad = try number(object, "rad") ?? 0
        let desc: String?
        switch object["desc"] {
        case nil, .null?: desc = nil
        case .string(let text)?: desc = text.isEmpty ? nil : text
        case let other?:
            throw RegionValidationError(field: "desc", message: "must be a string, not \(RegionJSON.describe(other))")
        }
        if let rid = object["rid"], rid.stringValue == nil, !rid.isNull {
            throw RegionValidationError(field: "rid", message: "must be a string, not \(RegionJSON.describe(rid))")
        }
        var removal: RegionValidationError?
        if !(-90...90).contains(lat) || !(-180...180).contains(lon) {
            removal = RegionValidationError(
                field: !(-90...90).contains(lat) ? "lat" : "lon",
                message:
                    "\(Region.show(!(-90...90).contains(lat) ? lat : lon)) is out of range: OwnTracks' mark of a deleted waypoint"
            )
        } else if rad == 0 {
            removal = RegionValidationError(field: "rad", message: "is 0 or missing: the waypoint has no geofence")
        }
        var region: JSONObject = [
            "id": .string(regionID(tst: tst, subject: subject)), "lat": .number(lat), "lon": .number(lon),
            "radius": .number(rad), "notify": ["enter", "exit"],
        ]
        if let desc { region["name"] = .string(desc) }
        if let subject { region["subjects"] = .array([.string(subject)]) }
        return (region, tst, removal)
    }

    /// A number, or a string holding one (the booklet's own examples quote them: `"rad": "50"`); nil when
    /// absent or null. Never a non-finite one.
    private static func number(_ object: JSONObject, _ field: String) throws(RegionValidationError) -> Double? {
        switch object[field] {
        case nil, .null?: return nil
        case .number(let n)?:
            guard n.isFinite else { throw RegionValidationError(field: field, message: "must be a finite number") }
            return n
        case .string(let text)?:
            guard let n = Double(text.trimmingCharacters(in: .whitespaces)), n.isFinite,
                text.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE ".contains($0)) })
            else {
                throw RegionValidationError(
                    field: field,
                    message:
                        "must be a number, not the string \(JSONValue.string(String(text.prefix(40))).serialized())")
            }
            return n
        case let other?:
            throw RegionValidationError(field: field, message: "must be a number, not \(RegionJSON.describe(other))")
        }
    }
}

import Foundation

/// One fleet message (an MQTT payload) decoded as the MQTT source decodes it: a gpsd TPV or an OwnTracks
/// `location`, named by its `device`, its OwnTracks topic, else the topic itself.
///
/// In Core, with `FixUsability`, so that what a hostile publisher can send is fuzzed through to the code that
/// classifies the fix and words its refusal (where `tst: 1e300` once trapped).
public enum FleetPayload {
    /// A payload refused for its length alone.
    public static func tooLong(_ bytes: Int) -> GPSDJSONReport {
        .malformed(.init(.tooLong, "message of \(bytes) bytes is too long"))
    }

    /// Decodes one message: gpsd TPV or OwnTracks location.
    public static func decode(topic: String, payload: [UInt8]) -> GPSDJSONReport {
        if payload.count > GPSDJSON.maximumLineLength { return tooLong(payload.count) }
        // OwnTracks says `_type`, gpsd `class`; only an object with `_type` is parsed whole.
        if payload.contains(UInt8(ascii: "_")), let object = try? JSON.parse(payload),
            OwnTracksJSON.isOwnTracks(object)
        {
            return OwnTracksJSON.decode(object, subject: OwnTracksJSON.subject(topic: topic) ?? topic)
        }
        let report = GPSDJSON.decode(payload, defaultSubject: topic)
        // A TPV without `device` is named by its topic, which is held to the same naming rule.
        if case .tpv(var fix) = report, fix.subject == topic {
            if let problem = SubjectName.problem(topic) {
                return .malformed(.init(.badDevice, "a TPV without \"device\" on a topic that \(problem)"))
            }
            fix.subject = VisibleName.normalized(topic)
            return .tpv(fix)
        }
        return report
    }
}

/// Why a decoded fleet fix is no usable one, beyond `MalformedLine.Kind`: the kind to count and the words to
/// log (`SourceStatus` counts them by these kinds).
public enum FixUsability {
    /// A fix whose mode is below 2D (no fix, or no mode given).
    public static let noFix = "no-fix"
    /// A 2D or 3D fix without a latitude or a longitude.
    public static let noPosition = "no-position"
    /// A fix whose latitude or longitude is out of range or not finite.
    public static let badPosition = "bad-position"
    /// A fix dated more than `maximumLead` seconds ahead of the engine's clock.
    public static let futureTime = "future-time"
    /// How far ahead of the engine's clock a fleet fix's own time may be. A fleet's fixes are judged by
    /// their own times (a backlog from a persistent session is rightly old), so a time far ahead (a
    /// device whose clock is wrong, a payload that lies) would hold every true fix of that vehicle back
    /// as out of order until the clock caught up with it, and could open its track with a false event.
    public static let maximumLead: Double = 60

    /// Whether a fix counts as "data arriving": a 2D or 3D fix with a valid position.
    public static func isUsable(_ fix: Fix) -> Bool {
        guard fix.mode >= .twoD, let latitude = fix.latitude, let longitude = fix.longitude else { return false }
        return Coordinate(latitude: latitude, longitude: longitude).isValid
    }

    /// Why a decoded fix is no usable one (the kind to count, the words to log), or nil.
    public static func reason(_ fix: Fix) -> (kind: String, why: String)? {
        if fix.mode < .twoD { return (noFix, "a TPV with mode \(fix.mode.rawValue): no 2D or 3D fix") }
        if fix.latitude == nil || fix.longitude == nil {
            return (noPosition, "a TPV without \"lat\" and \"lon\"")
        }
        if !isUsable(fix) { return (badPosition, "a TPV whose position is out of range") }
        return nil
    }

    /// A fix whose own time is more than `maximumLead` ahead of `now`: the kind and the words, or nil.
    ///
    /// The decoders hold fix times to the years 0000-9999, but a `Fix` can be made by anyone (the library):
    /// the lead is shown through `Fix.seconds`, which no time can make trap.
    public static func reason(_ fix: Fix, now: Date) -> (kind: String, why: String)? {
        guard let time = fix.time else { return nil }
        let lead = time.timeIntervalSince(now)
        guard lead > maximumLead else { return nil }
        return (
            futureTime,
            "a fix dated \(TimestampParser.format(time)), \(Fix.seconds(lead)) s ahead of this engine's clock "
                + "(more than \(Fix.seconds(maximumLead)) s)"
        )
    }
}

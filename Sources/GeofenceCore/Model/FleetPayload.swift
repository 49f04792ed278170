import Foundation

/// One fleet message (an MQTT payload) decoded as the MQTT source decodes it: a gpsd TPV or an OwnTracks
/// `location`, named by its `device`, its OwnTracks topic, else the topic itself.
///
/// In Core, with `FixFilter.classify` and `FixUsability`, so that what a hostile publisher can send is fuzzed
/// through to the code that classifies the fix and words its refusal (where `tst: 1e300` once trapped).
package enum FleetPayload {
    /// A payload refused for its length alone.
    package static func tooLong(_ bytes: Int) -> GPSDJSONReport {
        .malformed(.init(.tooLong, "message of \(bytes) bytes is too long"))
    }

    /// Decodes one message: gpsd TPV or OwnTracks location.
    package static func decode(topic: String, payload: [UInt8]) -> GPSDJSONReport {
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

/// How a fleet source counts and words a fix that `FixFilter.classify` finds no usable one, beyond
/// `MalformedLine.Kind`: the kind to count and the words to log (`SourceStatus` counts them by these kinds).
public enum FixUsability {
    /// A fix whose mode is below 2D (no fix, or no mode given).
    public static let noFix = "no-fix"
    /// A 2D or 3D fix without a latitude or a longitude.
    public static let noPosition = "no-position"
    /// A fix whose latitude or longitude is out of range or not finite.
    public static let badPosition = "bad-position"
    /// A fix at exactly (0, 0), a receiver's placeholder.
    public static let nullIsland = "null-island"
    /// A fix without a time.
    public static let noTime = "no-time"
    /// A fix dated more than `FixFilterConfiguration.maxFutureSkew` seconds ahead of the engine's clock.
    public static let futureTime = "future-time"
    /// A fix older than `FixFilterConfiguration.maxAgeAtReceipt` (only for fixes that carry their receipt time).
    public static let stale = "stale"

    /// The kind and the words for a fix classified `verdict`, or nil when it is usable.
    ///
    /// The decoders hold fix times to the years 0000-9999, but a `Fix` can be made by anyone (the library):
    /// a lead or an age is shown through `Fix.seconds`, which no number can make trap.
    package static func reason(_ verdict: FixClass, configuration: FixFilterConfiguration)
        -> (kind: String, why: String)?
    {
        switch verdict {
        case .usable: return nil
        case .noFix(let mode): return (noFix, "a TPV with mode \(mode.rawValue): no 2D or 3D fix")
        case .noPosition: return (noPosition, "a TPV without \"lat\" and \"lon\"")
        case .badPosition: return (badPosition, "a TPV whose position is out of range")
        case .nullIsland: return (nullIsland, "a TPV at exactly (0, 0), a receiver's placeholder")
        case .noTime: return (noTime, "a TPV without a fix time")
        case .future(let lead):
            return (
                futureTime,
                "a fix \(Fix.seconds(lead)) s ahead of this engine's clock "
                    + "(more than \(Fix.seconds(configuration.maxFutureSkew)) s)"
            )
        case .stale(let age):
            return (
                stale,
                "a fix \(Fix.seconds(age)) s old at receipt (more than \(Fix.seconds(configuration.maxAgeAtReceipt)) s)"
            )
        }
    }
}

// fuzz-seeds: gpsd
// fuzz-max-len: 70000

import Foundation
import GeofenceCore

/// gpsd reports into `GPSDJSON.decode`, whose streaming member walk is checked against a plain
/// `JSON.parse` of the same line: they must agree on what is malformed, and a TPV's fix must hold
/// exactly the finite values the line gave. Each fix then goes through `FixFilter.classify` as the JSON-lines
/// source's does (seeds with extreme numbers: `tpv-extreme-*`, `tpv-nan-spellings`, `tpv-overflow`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGPSDJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let line = fuzzInput(data, size)
    let received = Date(timeIntervalSince1970: 1_796_000_000.25)
    let report = GPSDJSON.decode(line, defaultSubject: "default", receivedAt: received)

    if line.count > GPSDJSON.maximumLineLength {
        require(isMalformed(report), "an over-long line must be refused, got \(report)")
        return 0
    }
    switch line.first {
    case UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "#"):
        if case .other = report { return 0 }
        fatalError("NMEA or a comment must be .other, got \(report)")
    default:
        break
    }
    guard case .object(let object)? = try? JSON.parse(line) else {
        guard case .malformed(let reason) = report else {
            fatalError("JSON.parse refuses the line (or it is no object), decode gave \(report)")
        }
        require(reason.kind == .notJSON, "unexpected reason for invalid JSON: \(reason)")
        return 0
    }
    let expected = expectedReport(object, received: received)
    switch (report, expected) {
    case (.malformed, .malformed):
        break
    default:
        require(report == expected, "decode gave \(report), the parsed object says \(expected)")
    }
    if case .tpv(let fix) = report {
        checkFinite(fix)
        classify(fix)
    }
    return 0
}

/// What the JSON-lines source does with a decoded fix before the engine judges it: the future check against
/// the engine's clock (now, and at the ends of the years the engine takes), the usability classification,
/// and the time as `status` writes it. Extreme numbers must get there as refusals, never as a trap.
private func classify(_ fix: Fix) {
    let filter = FixFilterConfiguration()
    for now in [1_796_000_000.25, 0, -62_167_219_200, Fix.representableTimes.upperBound - 0.001] {
        let verdict = FixFilter.classify(fix, now: Date(timeIntervalSince1970: now), configuration: filter)
        let reason = FixUsability.reason(verdict, configuration: filter)
        require((reason == nil) == verdict.isUsable, "classification disagrees: \(fix)")
        // The filter's verdict on a fix of its own refusal is that refusal.
        if let rejection = verdict.rejection {
            var judge = FixFilter(configuration: filter)
            var received = fix
            received.receivedAt = Date(timeIntervalSince1970: now)
            require(judge.evaluate(received) == .rejected(rejection), "the filter disagrees: \(fix)")
        }
    }
    if let time = fix.time {
        require(Fix.representableTimes.contains(time.timeIntervalSince1970), "a time out of range: \(fix)")
        require((try? TimestampParser.parse(TimestampParser.format(time))) != nil, "\(time) does not read back")
    }
}

private func isMalformed(_ report: GPSDJSONReport) -> Bool {
    if case .malformed = report { return true }
    return false
}

/// What decode must return for `object`, worked out from the whole parsed object instead of the
/// decoder's streaming walk. Reasons of `.malformed` are not compared.
private func expectedReport(_ object: JSONObject, received: Date) -> GPSDJSONReport {
    let refused = MalformedLine(.notJSON, "")
    guard let klass = object["class"]?.stringValue else { return .malformed(refused) }
    guard klass == "TPV" else { return .other(klass) }
    let numeric = [
        "mode", "lat", "lon", "altHAE", "altMSL", "alt", "eph", "epx", "epy", "epv", "speed", "track",
    ]
    for key in numeric {
        switch object[key] {
        case nil, .null?, .number?: continue
        default: return .malformed(refused)
        }
    }
    var time: Date?
    switch object["time"] {
    case nil, .null?: break
    case .string(let text)?:
        guard let parsed = try? TimestampParser.parse(text) else { return .malformed(refused) }
        time = parsed
    default: return .malformed(refused)
    }
    func finite(_ key: String) -> Double? {
        guard let value = object[key]?.doubleValue, value.isFinite else { return nil }
        return value
    }
    var subject = "default"
    switch object["device"] {
    case nil, .null?: break
    case .string(let name)?:
        guard SubjectName.problem(name) == nil else { return .malformed(refused) }
        subject = VisibleName.normalized(name)
    default: return .malformed(refused)
    }
    let mode = object["mode"]?.intValue.flatMap(FixMode.init(rawValue:)) ?? .unknown
    let msl = object["altMSL"]?.doubleValue ?? object["alt"]?.doubleValue
    return .tpv(
        Fix(
            subject: subject, time: time, receivedAt: received, mode: mode,
            latitude: finite("lat"), longitude: finite("lon"), altitudeHAE: finite("altHAE"),
            altitudeMSL: msl.flatMap { $0.isFinite ? $0 : nil },
            horizontalAccuracy: Fix.horizontalAccuracy(
                eph: object["eph"]?.doubleValue, epx: object["epx"]?.doubleValue, epy: object["epy"]?.doubleValue),
            verticalAccuracy: finite("epv").flatMap { $0 >= 0 ? $0 : nil }, speed: finite("speed"),
            course: finite("track")))
}

/// No fix carries a value JSON cannot state or a negative error estimate.
private func checkFinite(_ fix: Fix) {
    let values = [
        fix.latitude, fix.longitude, fix.altitudeHAE, fix.altitudeMSL, fix.horizontalAccuracy,
        fix.verticalAccuracy, fix.speed, fix.course, fix.time?.timeIntervalSince1970,
    ]
    for case let value? in values {
        require(value.isFinite, "a fix holds a non-finite value: \(fix)")
    }
    require((fix.horizontalAccuracy ?? 0) >= 0, "negative horizontal accuracy: \(fix)")
    require((fix.verticalAccuracy ?? 0) >= 0, "negative vertical accuracy: \(fix)")
}

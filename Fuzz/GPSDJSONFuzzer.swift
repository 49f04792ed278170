// fuzz-seeds: gpsd
// fuzz-max-len: 70000

import Foundation
import GeofenceCore

/// gpsd reports into `GPSDJSON.decode`, whose streaming member walk is checked against a plain
/// `JSON.parse` of the same line: they must agree on what is malformed, and a TPV's fix must hold
/// exactly the finite values the line gave.
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
        require(reason.hasPrefix("not a JSON object"), "unexpected reason for invalid JSON: \(reason)")
        return 0
    }
    let expected = expectedReport(object, received: received)
    switch (report, expected) {
    case (.malformed, .malformed):
        break
    default:
        require(report == expected, "decode gave \(report), the parsed object says \(expected)")
    }
    if case .tpv(let fix) = report { checkFinite(fix) }
    return 0
}

private func isMalformed(_ report: GPSDJSONReport) -> Bool {
    if case .malformed = report { return true }
    return false
}

/// What decode must return for `object`, worked out from the whole parsed object instead of the
/// decoder's streaming walk. Reasons of `.malformed` are not compared.
private func expectedReport(_ object: JSONObject, received: Date) -> GPSDJSONReport {
    guard let klass = object["class"]?.stringValue else { return .malformed("") }
    guard klass == "TPV" else { return .other(klass) }
    let numeric = [
        "mode", "lat", "lon", "altHAE", "altMSL", "alt", "eph", "epx", "epy", "epv", "speed", "track",
    ]
    for key in numeric {
        switch object[key] {
        case nil, .null?, .number?: continue
        default: return .malformed("")
        }
    }
    var time: Date?
    switch object["time"] {
    case nil, .null?: break
    case .string(let text)?:
        guard let parsed = try? TimestampParser.parse(text) else { return .malformed("") }
        time = parsed
    default: return .malformed("")
    }
    func finite(_ key: String) -> Double? {
        guard let value = object[key]?.doubleValue, value.isFinite else { return nil }
        return value
    }
    let mode = object["mode"]?.intValue.flatMap(FixMode.init(rawValue:)) ?? .unknown
    let msl = object["altMSL"]?.doubleValue ?? object["alt"]?.doubleValue
    return .tpv(
        Fix(
            subject: object["device"]?.stringValue ?? "default", time: time, receivedAt: received, mode: mode,
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

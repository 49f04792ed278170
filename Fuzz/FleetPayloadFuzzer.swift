// fuzz-max-len: 70000

import Foundation
import GeofenceCore

/// MQTT payloads as the MQTT source takes them: `FleetPayload.decode` (OwnTracks `location` or gpsd TPV),
/// then what the source does with a fix before the engine sees it, `FixFilter.classify` and the words of its
/// refusal (`FixUsability`), and the time written as `status` writes it. This is the path where one OwnTracks
/// message with `"tst":1e300` once trapped (`Double value cannot be converted to Int`).
///
/// The input is a topic, a newline and the payload (without a newline, the topic is `in/a`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFleetPayload(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    var topic = "in/a"
    var payload = Array(input)
    if let newline = input.firstIndex(of: UInt8(ascii: "\n")) {
        topic = String(decoding: input[..<newline], as: UTF8.self)
        payload = Array(input[(newline + 1)...])
    }
    let report = FleetPayload.decode(topic: topic, payload: payload)
    // The engine's clock at receipt: now, and at the ends of the years the engine takes.
    let clocks = [
        Date(timeIntervalSince1970: 1_796_000_000.25), Date(timeIntervalSince1970: 0),
        Date(timeIntervalSince1970: Fix.representableTimes.upperBound - 1),
    ]
    switch report {
    case .tpv(let fix):
        checkFix(fix)
        let filter = FixFilterConfiguration()
        for now in clocks.map(Optional.some) + [nil] {
            // As the source judges it, at each clock: a fix has a reason exactly when it is not usable.
            let verdict = FixFilter.classify(fix, now: now, configuration: filter)
            if let (kind, why) = FixUsability.reason(verdict, configuration: filter) {
                require(!kind.isEmpty && !why.isEmpty, "an empty reason for \(fix)")
                require(!verdict.isUsable, "a usable fix was given a reason: \(fix)")
                require(kind != FixUsability.stale, "a fleet fix judged for its age: \(fix)")
            } else {
                require(verdict.isUsable, "an unusable fix was given no reason: \(fix)")
            }
        }
        if let time = fix.time {
            // `status` and the log write the last fix's time; it must read back.
            let text = TimestampParser.format(time)
            require((try? TimestampParser.parse(text)) != nil, "\(text) does not read back")
        }
        require(SubjectName.problem(fix.subject) == nil, "a fix with a refused subject: \(fix.subject)")
        // The fix as the event's JSON carries it.
        let numbers: [Double?] = [
            fix.latitude, fix.longitude, fix.horizontalAccuracy, fix.speed, fix.course, fix.altitudeMSL,
        ]
        var object = JSONObject()
        for (i, n) in numbers.enumerated() { if let n { object["n\(i)"] = .number(n) } }
        _ = JSONValue.object(object).serialized()
    case .malformed(let problem):
        require(!problem.description.isEmpty, "a refusal without words")
        _ = PrintableText.escaped(problem.description)
    case .other:
        break
    }
    checkOwnTracksTime(payload, report)
    return 0
}

/// No fix carries a value JSON cannot state, a negative error estimate or a time outside the years 0000-9999.
private func checkFix(_ fix: Fix) {
    let values = [
        fix.latitude, fix.longitude, fix.altitudeHAE, fix.altitudeMSL, fix.horizontalAccuracy,
        fix.verticalAccuracy, fix.speed, fix.course, fix.time?.timeIntervalSince1970,
    ]
    for case let value? in values {
        require(value.isFinite, "a fix holds a non-finite value: \(fix)")
    }
    require((fix.horizontalAccuracy ?? 0) >= 0, "negative horizontal accuracy: \(fix)")
    require((fix.verticalAccuracy ?? 0) >= 0, "negative vertical accuracy: \(fix)")
    if let time = fix.time {
        require(Fix.representableTimes.contains(time.timeIntervalSince1970), "a time out of range: \(fix)")
    }
}

/// An OwnTracks location whose `tst` is a number outside the years the engine takes is refused as `bad-time`.
private func checkOwnTracksTime(_ payload: [UInt8], _ report: GPSDJSONReport) {
    guard payload.count <= GPSDJSON.maximumLineLength, let object = try? JSON.parse(payload),
        object["_type"]?.stringValue == "location", case .number(let tst)? = object["tst"]
    else { return }
    guard !(tst > 0 && Fix.representableTimes.contains(tst)) else { return }
    if case .malformed = report { return }
    fatalError("an OwnTracks tst of \(tst) was not refused: \(report)")
}

import Foundation

extension RegionEvent {
    /// The event as DESIGN.md's shared shape: one line of `replay`/`watch`, a hook's stdin.
    package var json: JSONObject {
        var o: JSONObject = [
            "id": .string(id), "type": .string(type.rawValue), "region": .string(region),
        ]
        if let subject { o["subject"] = .string(subject) }
        o["time"] = .string(TimestampParser.format(time))
        if let state { o["state"] = .string(state.rawValue) }
        if let previous { o["previous"] = .string(previous.rawValue) }
        o["inferred"] = .bool(inferred)
        if let distance { o["distance"] = .number((distance * 10).rounded() / 10) }
        o["radius"] = .number(radius)
        if let fix { o["fix"] = .object(fix.json) }
        return o
    }

    /// Reads an event back from its JSON (the outbox keeps the JSON as written).
    package init?(json o: JSONObject) {
        guard let id = o["id"]?.stringValue, let typeText = o["type"]?.stringValue,
            let type = RegionEventType(rawValue: typeText), let region = o["region"]?.stringValue,
            let timeText = o["time"]?.stringValue, let time = try? TimestampParser.parse(timeText),
            let radius = o["radius"]?.doubleValue
        else { return nil }
        self.init(
            id: id, type: type, region: region, subject: o["subject"]?.stringValue, time: time,
            state: o["state"]?.stringValue.flatMap(RegionState.init(rawValue:)),
            previous: o["previous"]?.stringValue.flatMap(RegionState.init(rawValue:)),
            inferred: o["inferred"]?.boolValue ?? false, distance: o["distance"]?.doubleValue, radius: radius,
            fix: o["fix"]?.objectValue.flatMap(EventFix.init(json:)))
    }
}

extension EventFix {
    package var json: JSONObject {
        var o: JSONObject = [
            "lat": .number(latitude), "lon": .number(longitude), "accuracy": .number(accuracy),
        ]
        if accuracyEstimated { o["accuracyEstimated"] = .bool(true) }
        o["mode"] = .number(Double(mode.rawValue))
        if let speed { o["speed"] = .number(speed) }
        if let course { o["course"] = .number(course) }
        return o
    }

    package init?(json o: JSONObject) {
        guard let lat = o["lat"]?.doubleValue, let lon = o["lon"]?.doubleValue,
            let accuracy = o["accuracy"]?.doubleValue
        else { return nil }
        self.init(
            latitude: lat, longitude: lon, accuracy: accuracy,
            accuracyEstimated: o["accuracyEstimated"]?.boolValue ?? false,
            mode: o["mode"]?.intValue.flatMap(FixMode.init(rawValue:)) ?? .unknown, speed: o["speed"]?.doubleValue,
            course: o["course"]?.doubleValue)
    }
}

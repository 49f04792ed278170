import GeofenceCore

/// What the consumers of an event (hooks, sinks) read of its JSON, decoded at most once per event read from
/// the store (`StoredEvent.fields`, at first use; `ClaimedDelivery.fields`): no consumer parses or searches
/// the body itself.
///
/// The body stays the event's text, exactly as stored: the payload sinks publish and hooks read on stdin.
package struct EventFields: Sendable, Equatable {
    /// One scalar member of the event: its key and its value as text (strings as they are, numbers as in
    /// the JSON, booleans `true`/`false`).
    package struct Scalar: Sendable, Equatable {
        package var key: String
        package var text: String
        /// A member of the event's `fix` object rather than of the event itself.
        package var inFix: Bool
    }

    /// `state`: where the subject is after a region event (a state event's own `state` is not one of
    /// these, so it is nil there).
    package var state: RegionState?
    /// The fix that caused the event; nil for events without one (or with one lacking a position).
    package var fix: EventFix?
    /// Every scalar member, in the body's order, the fix's members where the fix is: what hooks see as
    /// `GEOFENCE_*`, including fields added later.
    package var scalars: [Scalar]

    /// The fields of `body`; none for a body that is not a JSON object (which the engine never writes).
    package init(body: String) {
        guard case .object(let event)? = try? JSON.parse(body) else {
            self.init(state: nil, fix: nil, scalars: [])
            return
        }
        var scalars: [Scalar] = []
        var fix: EventFix?
        for (key, value) in event {
            if key == "fix", case .object(let members) = value {
                fix = EventFix(json: members)
                for (fixKey, fixValue) in members {
                    if let text = Self.text(fixValue) { scalars.append(Scalar(key: fixKey, text: text, inFix: true)) }
                }
            } else if let text = Self.text(value) {
                scalars.append(Scalar(key: key, text: text, inFix: false))
            }
        }
        self.init(
            state: event["state"]?.stringValue.flatMap(RegionState.init(rawValue:)), fix: fix, scalars: scalars)
    }

    package init(state: RegionState?, fix: EventFix?, scalars: [Scalar]) {
        self.state = state
        self.fix = fix
        self.scalars = scalars
    }

    /// A JSON value as a variable's text: strings as they are, numbers as in the JSON, booleans as true/false.
    static func text(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): s
        case .number, .bool: value.serialized()
        default: nil
        }
    }
}

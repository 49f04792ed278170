import Foundation

/// The vehicles a Home Assistant sink has announced (`sink_trackers`): those whose retained discovery config
/// is on the broker, as far as the sink knows. A vehicle is recorded before its config is published and
/// forgotten only once the broker has acknowledged the empty messages that clear it, so a crash in between
/// leaves it recorded and the next start clears it again (an empty retained message twice is harmless).
extension SinkRepository {
    /// The vehicles sink `id` has announced, by name.
    package func trackers(sink id: String) throws -> Set<String> {
        try queue.read { db in
            var all: Set<String> = []
            try db.forEachRow("SELECT subject FROM sink_trackers WHERE sink = ?", [id]) {
                all.insert(try $0.string("subject"))
            }
            return all
        }
    }

    /// Records that sink `id` announces `subjects` (before it publishes their config).
    package func recordTrackers(sink id: String, subjects: [String]) throws {
        guard !subjects.isEmpty else { return }
        try queue.write { db in
            for subject in subjects {
                try db.execute("INSERT OR IGNORE INTO sink_trackers (sink, subject) VALUES (?, ?)", [id, subject])
            }
        }
    }

    /// Forgets `subjects` of sink `id` (their retained messages were cleared and acknowledged).
    package func forgetTrackers(sink id: String, subjects: [String]) throws {
        guard !subjects.isEmpty else { return }
        try queue.write { db in
            for subject in subjects {
                try db.execute("DELETE FROM sink_trackers WHERE sink = ? AND subject = ?", [id, subject])
            }
        }
    }
}

import Foundation

/// The `settings` table: one text value a key (the services switch, limits, the engine's mark).
package struct SettingsRepository: Sendable {
    let queue: DatabaseQueue

    package func value(_ key: String) throws -> String? {
        try queue.read { db in try db.scalar("SELECT value FROM settings WHERE key = ?", [key], as: String.self) }
    }

    package func set(_ key: String, _ value: String, now: Date = Date()) throws {
        try queue.write { db in try Self.set(key, value, now: now, db: db) }
    }

    /// Sets a value within the caller's transaction.
    static func set(_ key: String, _ value: String, now: Date, db: DatabaseConnection) throws {
        try db.execute(
            "INSERT OR REPLACE INTO settings (key, value, updated_at) VALUES (?, ?, ?)",
            [key, value, now.timeIntervalSince1970])
    }
}

import Foundation

/// A bearer token of the HTTP API as the store keeps it: its name, what it may do, and the SHA-256 of the
/// token (hex). The token itself is never stored.
package struct StoredToken: Sendable, Equatable {
    /// What a token may do: `read` (GET) or `write` (GET, and changes to regions).
    package enum Scope: String, Sendable, CaseIterable {
        case read
        case write

        /// Whether a token of this scope may do what `needed` allows.
        package func allows(_ needed: Scope) -> Bool { self == .write || needed == .read }
    }

    /// 1 to 64 characters of `A-Z a-z 0-9 . _ -`.
    package var id: String
    package var scope: Scope
    /// The SHA-256 of the token, 64 lower-case hex digits.
    package var hash: String
    package var createdAt: Date

    package init(id: String, scope: Scope, hash: String, createdAt: Date) {
        self.id = id
        self.scope = scope
        self.hash = hash
        self.createdAt = createdAt
    }

    /// Why `id` cannot name a token, or nil when it can.
    package static func idProblem(_ id: String) -> String? {
        guard !id.isEmpty, id.utf8.count <= 64 else { return "must be 1 to 64 characters" }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-".utf8)
        guard id.utf8.allSatisfy(allowed.contains) else { return "may hold only A-Z a-z 0-9 . _ -" }
        return nil
    }
}

/// Errors of the token table that a caller reports as they are.
package enum TokenStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case duplicateToken(String)
    case tokenNotFound(String)

    package var description: String {
        switch self {
        case .duplicateToken(let id): "a token named \"\(id)\" already exists (remove it first to make a new one)"
        case .tokenNotFound(let id): "no token named \"\(id)\""
        }
    }
}

/// The `http_tokens` table (`geofence token add|list|remove`); the HTTP API looks a request's token up by its
/// hash.
package struct TokenRepository: Sendable {
    let queue: DatabaseQueue

    package func add(_ token: StoredToken) throws {
        try queue.write { db in
            do {
                try db.execute(
                    "INSERT INTO http_tokens (id, scope, hash, created_at) VALUES (?, ?, ?, ?)",
                    [token.id, token.scope.rawValue, token.hash, token.createdAt.timeIntervalSince1970])
            } catch let error as DatabaseError where error.isUniqueConstraintViolation {
                throw TokenStoreError.duplicateToken(token.id)
            }
        }
    }

    /// Every token, by name.
    package func all() throws -> [StoredToken] {
        try queue.read { db in
            var tokens: [StoredToken] = []
            try db.forEachRow("SELECT id, scope, hash, created_at FROM http_tokens ORDER BY id") { s in
                tokens.append(try Self.decode(s))
            }
            return tokens
        }
    }

    /// The token whose SHA-256 is `hash`, or nil.
    package func find(hash: String) throws -> StoredToken? {
        try queue.read { db in
            var found: StoredToken?
            try db.forEachRow("SELECT id, scope, hash, created_at FROM http_tokens WHERE hash = ?", [hash]) { s in
                found = try Self.decode(s)
            }
            return found
        }
    }

    /// Removes the tokens named, all or nothing; returns their names.
    package func remove(ids: [String]) throws -> [String] {
        try queue.write { db in
            var removed: [String] = []
            for id in ids where !removed.contains(id) {
                try db.execute("DELETE FROM http_tokens WHERE id = ?", [id])
                guard db.changes == 1 else { throw TokenStoreError.tokenNotFound(id) }
                removed.append(id)
            }
            return removed
        }
    }

    private static func decode(_ s: Statement) throws -> StoredToken {
        let scope = try s.string("scope")
        guard let known = StoredToken.Scope(rawValue: scope) else {
            throw StoreError.corruptRow("http_tokens: scope \"\(scope)\"")
        }
        return StoredToken(
            id: try s.string("id"), scope: known, hash: try s.string("hash"), createdAt: try s.date("created_at"))
    }
}

/// How `BEGIN` takes its locks.
package enum TransactionKind: String, Sendable {
    /// Takes the write lock at the first write; a transaction that reads, then writes, may then fail with `isBusy`
    /// if another connection wrote in between.
    case deferred = "DEFERRED"
    /// Takes the write lock at `BEGIN`, waiting up to the busy timeout: the kind for read-modify-write.
    case immediate = "IMMEDIATE"
    /// Like `immediate` (in WAL mode readers are never locked out).
    case exclusive = "EXCLUSIVE"
}

/// What the body of `inTransaction` asks for when it returns.
package enum TransactionCompletion: Sendable {
    case commit
    case rollback
}

extension DatabaseConnection {
    /// Runs `body` in a transaction, committed or rolled back as `body` returns.
    ///
    /// If `body` throws, or `COMMIT` fails, the transaction is rolled back and that error is rethrown: the first
    /// error wins, and a failing `ROLLBACK` is ignored rather than allowed to mask it. Called inside a transaction,
    /// it runs in a savepoint instead (`kind` is then irrelevant), so store operations compose into one atomic
    /// change: rolling back the inner part leaves the outer transaction going.
    package func inTransaction(
        _ kind: TransactionKind = .immediate, _ body: (DatabaseConnection) throws -> TransactionCompletion
    ) throws {
        if isInTransaction {
            try inSavepoint(body)
            return
        }
        try execute("BEGIN \(kind.rawValue) TRANSACTION")
        let completion: TransactionCompletion
        do {
            completion = try body(self)
        } catch {
            rollbackIgnoringErrors()
            throw error
        }
        switch completion {
        case .commit:
            do {
                try execute("COMMIT TRANSACTION")
            } catch {
                rollbackIgnoringErrors()
                throw error
            }
        case .rollback:
            try execute("ROLLBACK TRANSACTION")
        }
    }

    /// Runs `body` in a transaction that commits unless `body` throws, and returns its result.
    @discardableResult
    package func write<Result>(
        _ kind: TransactionKind = .immediate, _ body: (DatabaseConnection) throws -> Result
    ) throws -> Result {
        var result: Result?
        try inTransaction(kind) { db in
            result = try body(db)
            return .commit
        }
        return result!
    }

    /// Runs `body` in a deferred transaction, so all its queries see one snapshot, with writes refused, so an
    /// accidental write fails with `isReadOnly` (`ConnectionHandle.refusesWrites`: each statement is checked with
    /// `sqlite3_stmt_readonly` before it runs; `PRAGMA query_only` would expire the connection's prepared statements).
    package func read<Result>(_ body: (DatabaseConnection) throws -> Result) throws -> Result {
        readDepth += 1
        handle.refusesWrites = true
        defer {
            readDepth -= 1
            if readDepth == 0 { handle.refusesWrites = false }
        }
        var result: Result?
        try inTransaction(.deferred) { db in
            result = try body(db)
            return .commit
        }
        return result!
    }

    private func inSavepoint(_ body: (DatabaseConnection) throws -> TransactionCompletion) throws {
        let name = "geofence_savepoint_\(savepointDepth)"
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        try execute("SAVEPOINT \(name)")
        let completion: TransactionCompletion
        do {
            completion = try body(self)
        } catch {
            rollbackIgnoringErrors(to: name)
            throw error
        }
        switch completion {
        case .commit:
            do {
                try execute("RELEASE SAVEPOINT \(name)")
            } catch {
                rollbackIgnoringErrors(to: name)
                throw error
            }
        case .rollback:
            try execute("ROLLBACK TRANSACTION TO SAVEPOINT \(name)")
            try execute("RELEASE SAVEPOINT \(name)")
        }
    }

    func rollbackIgnoringErrors() {
        // Fails when SQLite already rolled back by itself (after SQLITE_FULL, SQLITE_IOERR, …): nothing to undo,
        // and the error that caused it is the one to report.
        try? execute("ROLLBACK TRANSACTION")
    }

    private func rollbackIgnoringErrors(to savepoint: String) {
        // ROLLBACK TO keeps the savepoint on the stack; RELEASE removes it, leaving the outer transaction as it was.
        try? execute("ROLLBACK TRANSACTION TO SAVEPOINT \(savepoint)")
        try? execute("RELEASE SAVEPOINT \(savepoint)")
    }
}

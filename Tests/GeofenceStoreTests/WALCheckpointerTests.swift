import Foundation
import GeofenceStore
import GeofenceTestSupport
import Testing

/// `WALCheckpointer`: with it installed, no commit checkpoints the WAL (the committing connections only report
/// its growth), and its own thread does, once the WAL has grown its threshold. A real SQLite file.
@Suite struct WALCheckpointerTests {
    /// Commits `transactions` transactions of about 16 pages each (fresh 64 KiB blobs) through `store`.
    private func grow(_ store: StateStore, transactions: Int) throws {
        for _ in 0..<transactions {
            try store.queue.write { db in
                try db.execute("INSERT INTO filler (data) VALUES (randomblob(65536))")
            }
        }
    }

    private func withStore(_ body: (StateStore) throws -> Void) throws {
        try withTemporaryDirectory("geofence-checkpoint-tests") { directory in
            let store = try StateStore(directory: directory.path)
            try store.queue.write { db in try db.execute("CREATE TABLE filler (data BLOB)") }
            try body(store)
        }
    }

    @Test("installed and held: commits let the WAL grow past SQLite's 1,000 pages instead of checkpointing")
    func commitsDoNotCheckpoint() throws {
        try withStore { store in
            let checkpointer = try WALCheckpointer.install(path: store.path, paused: true)
            defer { checkpointer.stop() }
            // A connection opened after the install is attached by itself (the hook runner's, a sink's).
            let other = try StateStore(directory: store.directory)
            try grow(other, transactions: 100)
            // SQLite's automatic checkpoint would have copied the WAL into the database at 1,000 pages and the
            // next transaction would have started it over: it holds them all.
            #expect(checkpointer.pendingPages >= 1_600, "WAL pages reported: \(checkpointer.pendingPages)")
            #expect(checkpointer.current.runs == 0)

            checkpointer.resume()
            let done = Wait.blocking(timeout: 10) { checkpointer.current.runs >= 1 }
            #expect(done, "the checkpointer's thread ran")
            let stats = checkpointer.current
            #expect(stats.lastError == nil)
            #expect(stats.walFrames >= 1_600 && stats.checkpointedFrames == stats.walFrames, "\(stats)")
        }
    }

    @Test("the engine's own connection, opened before the install, is attached by checkpointOnThread")
    func engineConnectionAttached() throws {
        try withStore { store in
            let checkpointer = try store.checkpointOnThread()
            defer { checkpointer.stop() }
            try grow(store, transactions: 100)
            // A checkpoint each 1,000 pages of growth, not one a commit; once the commits pause (a second), one
            // more moves the rest, and the WAL starts over at the next commit.
            let complete = Wait.blocking(timeout: 10) {
                let stats = checkpointer.current
                return stats.walFrames >= 1_600 && stats.checkpointedFrames == stats.walFrames
            }
            #expect(complete, "\(checkpointer.current)")
            #expect(checkpointer.current.runs <= 3, "\(checkpointer.current)")
            #expect(checkpointer.current.lastError == nil)
            try grow(store, transactions: 2)
            #expect(checkpointer.pendingPages < 100, "started over: \(checkpointer.pendingPages)")
        }
    }

    @Test("pages below the threshold after a checkpoint that left nothing pending are checkpointed once idle")
    func idleAfterNothingPending() throws {
        try withStore { store in
            let checkpointer = try WALCheckpointer.install(path: store.path, threshold: 200, idle: .milliseconds(200))
            defer { checkpointer.stop() }
            let other = try StateStore(directory: store.directory)
            // Past the threshold, then a pause: the checkpoint runs with no commit behind it, so nothing is
            // pending afterwards and the thread waits without a deadline (the case a CI run under load hit
            // between the threshold's checkpoint and the next commit).
            try grow(other, transactions: 14)
            #expect(Wait.blocking(timeout: 10) { checkpointer.current.runs >= 1 }, "\(checkpointer.current)")
            Thread.sleep(forTimeInterval: 0.3)
            let runs = checkpointer.current.runs
            // Far fewer pages than the threshold: only the idle checkpoint moves them.
            try grow(other, transactions: 2)
            #expect(
                Wait.blocking(timeout: 10) { checkpointer.current.runs > runs }, "\(checkpointer.current)")
            #expect(checkpointer.current.walFrames == checkpointer.current.checkpointedFrames)
        }
    }

    @Test("a WAL that never starts over under steady commits is checkpointed with RESTART at 4 x the threshold")
    func restartBoundsTheWAL() throws {
        try withStore { store in
            // Commits back to back and no idle checkpoint: a checkpoint runs while the next commit is being
            // written, so the WAL does not start over by itself.
            let checkpointer = try WALCheckpointer.install(path: store.path, threshold: 200, idle: .seconds(3_600))
            defer { checkpointer.stop() }
            let other = try StateStore(directory: store.directory)
            try grow(other, transactions: 70)
            #expect(
                Wait.blocking(timeout: 10) { checkpointer.current.restarts >= 1 }, "\(checkpointer.current)")
            try grow(other, transactions: 2)
            #expect(
                checkpointer.pendingPages < 800, "started over: \(checkpointer.pendingPages) \(checkpointer.current)")
        }
    }

    @Test("not installed: SQLite checkpoints in the commits, as before")
    func withoutItSQLiteCheckpoints() throws {
        try withStore { store in
            try grow(store, transactions: 100)
            // The WAL was restarted after an automatic checkpoint: far fewer frames than were written.
            let frames = try store.queue.writeWithoutTransaction { db in
                try db.query("PRAGMA wal_checkpoint(PASSIVE)").first?.decode(at: 1, as: Int.self) ?? -1
            }
            #expect(frames >= 0 && frames < 1_200, "WAL frames: \(frames)")
        }
    }
}

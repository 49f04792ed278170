import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Room for the store on a small or full file system, so that space freed by the operator goes to the store.
///
/// SQLite checkpoints its WAL only once it holds 1,000 pages (4 MiB), and never shrinks it: on a file system of a
/// few megabytes the WAL alone fills the disk, and a checkpoint then fails too, because moving the WAL's pages
/// into the database needs a little room of its own. So the engine keeps a reserve file, gives it back when a
/// write fails for want of space, checkpoints and truncates the WAL into the room it made, and makes the
/// reserve again once there is space. On a small file system the WAL is also checkpointed sooner and truncated
/// after each checkpoint (`fitWAL`).
package final class StoreSpace: Sendable {
    package static let reserveFileName = "geofence.reserve"
    package let store: StateStore
    /// The reserve's size in bytes: 512 KiB, or an eighth of a smaller file system.
    package let reserveBytes: Int
    private let path: String

    package init(store: StateStore) {
        self.store = store
        path = (store.directory as NSString).appendingPathComponent(Self.reserveFileName)
        let size = Self.filesystemBytes(store.directory) ?? Int.max
        reserveBytes = max(16 * 1024, min(512 * 1024, size / 8))
    }

    /// Whether the reserve file is there, whole.
    package var hasReserve: Bool {
        var info = stat()
        return stat(path, &info) == 0 && Int(info.st_blocks) * 512 >= reserveBytes
    }

    /// Makes the reserve file when it is missing and the file system has room for it and as much again.
    /// Returns whether the reserve is there.
    @discardableResult
    package func makeReserve() -> Bool {
        if hasReserve { return true }
        guard let free = Self.freeBytes(store.directory), free >= 2 * reserveBytes else { return false }
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        // Blocks really allocated (a sparse file would give back nothing).
        if posix_fallocate(fd, 0, off_t(reserveBytes)) != 0 {
            unlink(path)
            return false
        }
        return true
    }

    /// Gives the reserve's space back to the file system. Returns whether there was one.
    @discardableResult
    package func releaseReserve() -> Bool {
        unlink(path) == 0
    }

    /// After a write refused for want of space: gives the reserve back and moves the WAL into the database,
    /// truncating it to nothing. Returns whether the WAL was truncated.
    @discardableResult
    package func reclaim() -> Bool {
        releaseReserve()
        return (try? store.checkpointTruncating()) ?? false
    }

    /// On a file system under 64 MiB, checkpoints the WAL once it holds a sixteenth of the file system, and
    /// truncates it to that after each checkpoint, rather than letting it grow to 4 MiB. Returns whether it did
    /// (then the engine's own connection checkpoints, in its commits, rather than a `WALCheckpointer`).
    @discardableResult
    package func fitWAL() -> Bool {
        guard let size = Self.filesystemBytes(store.directory), size < 64 << 20 else { return false }
        let bytes = max(64 * 1024, size / 16)
        try? store.limitWAL(pages: max(16, bytes / 4096), bytes: bytes)
        return true
    }

    static func filesystemBytes(_ directory: String) -> Int? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        let (product, overflow) = Int(info.f_frsize).multipliedReportingOverflow(by: Int(clamping: info.f_blocks))
        return overflow ? Int.max : product
    }

    static func freeBytes(_ directory: String) -> Int? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        let (product, overflow) = Int(info.f_frsize).multipliedReportingOverflow(by: Int(clamping: info.f_bavail))
        return overflow ? Int.max : product
    }
}

extension StateStore {
    /// `PRAGMA wal_checkpoint(TRUNCATE)`: moves every page of the WAL into the database and truncates the WAL.
    /// Returns false when a reader kept it from completing.
    package func checkpointTruncating() throws -> Bool {
        try queue.writeWithoutTransaction { db in
            let busy = try db.scalar("PRAGMA wal_checkpoint(TRUNCATE)", as: Int.self) ?? 1
            return busy == 0
        }
    }

    /// Checkpoints the WAL at `pages` pages and truncates it to `bytes` after each checkpoint.
    /// Moves the WAL's checkpoints off every read-write connection of this process to a thread of their own
    /// (`WALCheckpointer`): this store's connection, and every one opened to its file from now on. Stop the
    /// checkpointer when the engine stops.
    package func checkpointOnThread() throws -> WALCheckpointer {
        let checkpointer = try WALCheckpointer.install(path: path)
        try queue.writeWithoutTransaction { db in db.attach(checkpointer) }
        return checkpointer
    }

    func limitWAL(pages: Int, bytes: Int) throws {
        try queue.writeWithoutTransaction { db in
            try db.execute("PRAGMA wal_autocheckpoint = \(pages)")
            _ = try db.scalar("PRAGMA journal_size_limit = \(bytes)", as: Int.self)
        }
    }
}

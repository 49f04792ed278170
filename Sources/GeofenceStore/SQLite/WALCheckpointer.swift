import CSQLite
import Foundation
import GeofenceSystem
import Synchronization

/// Checkpoints one database's WAL from a thread of its own (`geofence.checkpoint`), so that no transaction of
/// the engine, its hook runner or its sinks pays for one.
///
/// By default SQLite checkpoints inside the commit that lets the WAL pass 1,000 pages, in whichever connection
/// that is: about one transaction in a hundred then copies some 4 MB into the database and fsyncs it, and the
/// thread that committed (a hook's claim, a sink's cursor) waits hundreds of milliseconds on a slow disk
/// (Docs/benchmarks.md, "Commit to hook start"). Once installed for a file (`install`), every read-write
/// connection opened to it in this process hands its WAL's growth to this checkpointer instead
/// (`sqlite3_wal_hook`, which also turns SQLite's own automatic checkpoint off for that connection), and this
/// thread runs `PRAGMA wal_checkpoint(PASSIVE)`, which blocks neither readers nor writers, whenever the WAL has
/// grown `threshold` pages since the last checkpoint, and once commits have paused for `idle` with pages not
/// yet checkpointed. SQLite starts the WAL over at the first commit after a checkpoint that moved all of it;
/// under a steady stream of commits that may not come, so a WAL grown to 4 × `threshold` is checkpointed with
/// `RESTART` instead (which makes writers wait while it finishes). Connections opened before, or by other
/// processes (the CLI), checkpoint as SQLite does by default.
package final class WALCheckpointer: @unchecked Sendable {
    // @unchecked: the fields below `condition` are touched only with it locked; `connection` only by the thread.
    package let path: String
    /// WAL pages that start a checkpoint (SQLite's own automatic checkpoint starts at 1,000).
    package let threshold: Int
    private let condition = NSCondition()
    private var walPages = 0
    /// The WAL's size in pages when the last checkpoint ran (0 after SQLite started it over).
    private var baseline = 0
    private var lastGrowth = MonotonicClock.nanoseconds()
    /// How long commits must pause before the pages not yet checkpointed are.
    package let idle: Duration
    private var stopped = false
    private var paused: Bool
    private var statistics = Statistics()
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    private let connection: DatabaseConnection

    /// What the thread has done.
    package struct Statistics: Sendable, Equatable {
        /// Checkpoints run, and how many of them were `RESTART`s (a WAL that had not started over) that finished
        /// (a `RESTART` that stays busy, a writer holding on through its tries, is counted in `runs` only).
        package var runs = 0
        package var restarts = 0
        /// The WAL's frames, and how many of them were in the database, after the last checkpoint.
        package var walFrames = 0
        package var checkpointedFrames = 0
        /// The last checkpoint that failed (a busy lock is not a failure: it is tried again at the next growth).
        package var lastError: String?
    }

    private static let installed = Mutex<[String: WALCheckpointer]>([:])

    /// Starts a checkpointer for the database at `path` (which must exist, in WAL mode) and makes it the one
    /// read-write connections to that file opened from now on in this process hand their WAL's growth to.
    /// `paused`: the thread waits for `resume()` (tests).
    package static func install(
        path: String, threshold: Int = 1_000, idle: Duration = .seconds(1), paused: Bool = false
    ) throws -> WALCheckpointer {
        let checkpointer = try WALCheckpointer(path: path, threshold: threshold, idle: idle, paused: paused)
        installed.withLock { $0[key(path)] = checkpointer }
        checkpointer.start()
        return checkpointer
    }

    /// The checkpointer installed for `path`, if any.
    static func installed(for path: String) -> WALCheckpointer? {
        installed.withLock { $0[key(path)] }
    }

    private static func key(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.path }

    private init(path: String, threshold: Int, idle: Duration, paused: Bool) throws {
        self.path = path
        self.threshold = max(1, threshold)
        self.idle = idle
        self.paused = paused
        // Its own connection, never attached to itself (it is opened before the checkpointer is installed).
        connection = try DatabaseConnection(
            path: path, options: .init(busyTimeout: .milliseconds(100), statementCacheCapacity: 0))
    }

    private func start() {
        let thread = Thread { [self] in
            nameThisThread("geofence.checkpoint")
            loop()
            finished.signal()
        }
        thread.stackSize = 1 << 20
        self.thread = thread
        thread.start()
    }

    /// Stops the thread (after the checkpoint it may be running) and uninstalls it: connections opened later
    /// checkpoint as SQLite does by default; those attached keep handing their growth to a checkpointer that no
    /// longer runs, so stop it only when they are done (the engine's stop).
    package func stop() {
        Self.installed.withLock { table in
            if table[Self.key(path)] === self { table[Self.key(path)] = nil }
        }
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
        if thread != nil { finished.wait() }
        thread = nil
    }

    /// Lets a checkpointer installed `paused` run.
    package func resume() {
        condition.withLock {
            paused = false
            condition.broadcast()
        }
    }

    package var current: Statistics { condition.withLock { statistics } }

    /// The WAL's size in pages as the last commit of an attached connection left it.
    package var pendingPages: Int { condition.withLock { walPages } }

    /// From `sqlite3_wal_hook`, after each commit of an attached connection: the WAL holds `pages` pages.
    func walGrew(pages: Int) {
        condition.withLock {
            let wasPending = walPages > baseline
            if pages < walPages || pages < baseline { baseline = 0 }  // started over
            walPages = pages
            lastGrowth = MonotonicClock.nanoseconds()
            // The thread waits without a deadline while nothing is pending: the first page pending wakes it to
            // start the idle wait, or the pages below the threshold would wait for the next threshold's worth.
            if pages - baseline >= threshold || (!wasPending && pages > baseline) { condition.broadcast() }
        }
    }

    private func loop() {
        // At most a day, never negative: no conversion here can trap.
        let idleSeconds = Double(idle.components.seconds) + Double(idle.components.attoseconds) / 1e18
        let idleNanoseconds = UInt64(min(max(idleSeconds, 0), 86_400) * 1e9)
        while true {
            condition.lock()
            var due = false
            while !stopped && !due {
                let pending = walPages - baseline
                if !paused && pending >= threshold {
                    due = true
                } else if !paused && pending > 0 {
                    let quiet = MonotonicClock.nanoseconds() &- lastGrowth
                    if quiet >= idleNanoseconds {
                        due = true
                    } else {
                        _ = condition.wait(
                            until: Date(timeIntervalSinceNow: Double(idleNanoseconds - quiet) / 1e9 + 0.001))
                    }
                } else {
                    condition.wait()
                }
            }
            if stopped {
                condition.unlock()
                return
            }
            let mode = walPages >= 4 * threshold ? "RESTART" : "PASSIVE"
            baseline = walPages
            condition.unlock()
            checkpoint(mode)
        }
    }

    private func checkpoint(_ mode: String) {
        do {
            var row = try connection.query("PRAGMA wal_checkpoint(\(mode))").first
            // A RESTART that could not wait out a writer (busy) has copied what it could but left the WAL to grow
            // on: the next writer would not start it over, and no checkpoint comes before another threshold's
            // growth (or ever, once the commits stop). Tried again between the writers' transactions, a few
            // times a second, until it finishes or the thread is stopped.
            var tries = 1
            while mode == "RESTART", ((try? row?.decode(at: 0, as: Int.self)) ?? 0) != 0, tries < 100,
                !condition.withLock({ stopped })
            {
                Thread.sleep(forTimeInterval: 0.02)
                row = try connection.query("PRAGMA wal_checkpoint(RESTART)").first
                tries += 1
            }
            let busy = ((try? row?.decode(at: 0, as: Int.self)) ?? 0) != 0
            condition.withLock {
                statistics.runs += 1
                if mode == "RESTART" && !busy { statistics.restarts += 1 }
                statistics.walFrames = (try? row?.decode(at: 1, as: Int.self)) ?? 0
                statistics.checkpointedFrames = (try? row?.decode(at: 2, as: Int.self)) ?? 0
            }
        } catch {
            condition.withLock { statistics.lastError = "\(error)" }
        }
    }
}

extension DatabaseConnection {
    /// Hands this connection's WAL growth to `checkpointer` (`sqlite3_wal_hook`), which turns SQLite's automatic
    /// checkpoint off for it. The connection keeps the checkpointer alive.
    func attach(_ checkpointer: WALCheckpointer) {
        guard let pointer = handle.pointer else { return }
        attachedCheckpointer = checkpointer
        sqlite3_wal_hook(
            pointer,
            { context, _, _, pages in
                guard let context else { return SQLITE_OK }
                Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().walGrew(pages: Int(pages))
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }
}

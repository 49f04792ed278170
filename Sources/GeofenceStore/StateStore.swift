import CSQLite
import Foundation
import GeofenceCore

#if canImport(Glibc)
    import Glibc
#endif

/// Errors of the store's own making (SQLite's come as `DatabaseError`).
package enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case duplicateRegions([String])
    case regionNotFound(String)
    case cannotCreateDirectory(String, String)
    case corruptRow(String)
    /// The store's polygons would hold more positions than `RegionRepository.maxPolygonPositions`.
    case tooManyPolygonPositions(Int, limit: Int)

    package var description: String {
        switch self {
        case .duplicateRegions(let ids) where ids.count == 1:
            "a region with id \"\(ids[0])\" already exists (use --replace to overwrite it)"
        case .duplicateRegions(let ids):
            "\(ids.count) regions already exist: \(ids.prefix(5).map { "\"\($0)\"" }.joined(separator: ", "))"
                + (ids.count > 5 ? ", ..." : "") + " (use --replace to overwrite them)"
        case .regionNotFound(let id): "no region with id \"\(id)\""
        case .cannotCreateDirectory(let path, let reason): "cannot create the state directory \(path): \(reason)"
        case .corruptRow(let what): "the store holds a row it cannot read: \(what)"
        case .tooManyPolygonPositions(let count, let limit):
            "the regions' polygons would hold \(count) positions: at most \(limit) are allowed in one store "
                + "(remove some, or simplify them)"
        }
    }
}

/// The durable state of one state directory, shared by the CLI and the daemon through SQLite's WAL.
///
/// It holds the connection (`queue`): opening, migration, transactions. What is stored is reached through
/// one small repository an aggregate, each a value over the same queue: `regions`, `monitorState`,
/// `outbox`, `deliveries` (hooks too), `sinks`, `settings`, `permissions`, `requests`. A repository's
/// instance methods each run in a transaction of their own; a change that spans aggregates in one
/// transaction (an event written with the state change that caused it) composes their static
/// `…(…, db:)`/`into db:` parts inside one `queue.write`.
package final class StateStore: Sendable {
    package static let fileName = "geofence.db"
    package let directory: String
    package let queue: DatabaseQueue
    /// The database file (`directory/geofence.db`).
    package var path: String { (directory as NSString).appendingPathComponent(StateStore.fileName) }

    /// Opens (creating if needed, mode 0700) the state directory and its database, and migrates it.
    package init(directory: String, options: DatabaseConnection.Options = .init()) throws {
        try StateStore.makeDirectory(directory)
        self.directory = directory
        let path = (directory as NSString).appendingPathComponent(StateStore.fileName)
        let connection = try DatabaseConnection(path: path, options: options)
        if !options.readOnly { try Schema.migrator.migrate(connection) }
        queue = DatabaseQueue(connection: connection)
    }

    /// A store that lives in memory only, for tests and embedders who need no durability: the same schema and
    /// the same transactions as a file, gone with the process. Its `directory` is `:memory:`.
    package static func inMemory() throws -> StateStore {
        try StateStore(memory: ())
    }

    private init(memory: Void) throws {
        directory = ":memory:"
        let connection = try DatabaseConnection(path: ":memory:")
        try Schema.migrator.migrate(connection)
        queue = DatabaseQueue(connection: connection)
    }

    static func makeDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            if !isDirectory.boolValue {
                throw StoreError.cannotCreateDirectory(path, "it exists and is not a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StoreError.cannotCreateDirectory(path, String(cString: strerror(errno)))
        }
    }

    // MARK: The repositories, one an aggregate, all on this store's connection

    /// Requested regions, their polygons and imports, and the log of their changes.
    package var regions: RegionRepository { RegionRepository(queue: queue) }
    /// Where monitoring stands: subjects, their state in each region, and the regions' status.
    package var monitorState: MonitorStateRepository { MonitorStateRepository(queue: queue) }
    /// The event outbox.
    package var outbox: OutboxRepository { OutboxRepository(queue: queue) }
    /// Global hooks, and the deliveries of events to hooks.
    package var deliveries: DeliveryRepository { DeliveryRepository(queue: queue) }
    /// Event sinks and their cursors.
    package var sinks: SinkRepository { SinkRepository(queue: queue) }
    package var settings: SettingsRepository { SettingsRepository(queue: queue) }
    /// Clients' permissions and the Location Services switch.
    package var permissions: PermissionRepository { PermissionRepository(queue: queue) }
    /// Recorded answers to clients' requests.
    package var requests: RequestRepository { RequestRepository(queue: queue) }
    /// The HTTP API's bearer tokens, by hash.
    package var tokens: TokenRepository { TokenRepository(queue: queue) }

    /// `PRAGMA integrity_check`: empty when the database is sound.
    package func integrityCheck() throws -> [String] {
        try queue.writeWithoutTransaction { db in try db.integrityCheck() }
    }

    /// Makes this store's connection retry a database locked by another connection every 0.2 ms (for up to
    /// 5 s), instead of SQLite's default steps of 1, 2, 5, 10, 15, 20, 25 ms...
    ///
    /// For the hook runner's connection: its transactions and the daemon's are short and frequent, and the
    /// default steps turn a collision of two sub-millisecond commits into a wait of several milliseconds on the
    /// path from event to hook start.
    package func retryLocksQuickly() throws {
        try queue.writeWithoutTransaction { db in
            let pointer = try db.openPointer()
            sqlite3_busy_handler(
                pointer,
                { _, count in
                    guard count < 25_000 else { return 0 }
                    usleep(200)
                    return 1
                }, nil)
        }
    }
}

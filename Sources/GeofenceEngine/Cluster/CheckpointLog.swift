import Foundation
import GeofenceCore

/// Partitions' checkpoints in the checkpoint stream: each one the encoded state of a partition's vehicles
/// (`PartitionCheckpoint`'s bytes) and the fix-stream sequence it covers, so that a new owner restores it and
/// replays the partition's fixes from the next sequence.
///
/// A checkpoint may be larger than a message may be (1 MiB by default), so it is stored as chunks on
/// `geofence.checkpoint.P.data`, then a small head on `geofence.checkpoint.P.head` that names them: a head is
/// written only after all its chunks are stored, so the last head always names a whole checkpoint (an owner
/// that dies while writing leaves chunks no head names, which the next checkpoint purges). Older chunks and
/// heads are purged once a newer head is stored (all but the newest head and its chunks; only one owner writes a
/// partition's checkpoints, so nothing is written between its chunks and its head).
///
/// Every call **blocks** on JetStream.
package struct CheckpointLog {
    private let connection: NATSConnection
    private let layout: ClusterLayout
    /// The largest chunk, in bytes.
    package var chunkSize = 512 * 1024

    package init(connection: NATSConnection, layout: ClusterLayout) {
        self.connection = connection
        self.layout = layout
    }

    /// A checkpoint as stored.
    package struct Stored: Sendable, Equatable {
        /// The last fix-stream sequence whose fix the state includes.
        package var covered: UInt64
        /// The lease term of the owner that wrote it.
        package var term: UInt64
        package var owner: String
        package var bytes: [UInt8]
        /// The sequence of its head in the checkpoint stream.
        package var headSequence: UInt64
    }

    /// What went wrong with a stored checkpoint (not the connection's failures, which are `NATSError`).
    package struct Corrupt: Error, CustomStringConvertible {
        package var description: String
    }

    /// Stores `bytes` as partition `partition`'s checkpoint covering fix sequence `covered`; returns the head's
    /// sequence. Throws `NATSError` (nothing of it is then named by a head: the previous one stands).
    @discardableResult
    package func write(
        partition: Int, bytes: [UInt8], covered: UInt64, term: UInt64, owner: String, timeout: Duration? = nil
    ) throws -> UInt64 {
        let dataSubject = layout.checkpointDataSubject(partition: partition)
        // One time limit for the whole write, not one per call.
        let deadline = timeout.map { ContinuousClock.now + $0 }
        func left() -> Duration? { deadline.map { max(.milliseconds(1), $0 - ContinuousClock.now) } }
        var first: UInt64 = 0
        var chunks = 0
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + chunkSize)
            let ack = try connection.jetStreamPublish(
                subject: dataSubject, payload: Array(bytes[offset..<end]), timeout: left())
            if first == 0 { first = ack.sequence }
            chunks += 1
            offset = end
        } while offset < bytes.count
        let head = JSONValue.object([
            "first": .number(Double(first)), "chunks": .number(Double(chunks)),
            "bytes": .number(Double(bytes.count)), "covered": .string(String(covered)),
            "term": .string(String(term)), "owner": .string(owner),
        ]).serialized()
        let ack = try connection.jetStreamPublish(
            subject: layout.checkpointHeadSubject(partition: partition), payload: Array(head.utf8), timeout: left())
        // Housekeeping: a failure leaves older chunks for the next checkpoint to purge.
        try? connection.purge(
            stream: layout.checkpointStream, subject: dataSubject, keep: UInt64(chunks), timeout: left())
        try? connection.purge(
            stream: layout.checkpointStream, subject: layout.checkpointHeadSubject(partition: partition), keep: 1,
            timeout: left())
        return ack.sequence
    }

    /// The fix sequence the partition's last checkpoint covers, from its head alone (nil: no checkpoint, or a
    /// head that is not readable). **Blocks** for one JetStream request.
    package func covered(partition: Int) throws -> UInt64? {
        guard
            let head = try connection.lastMessage(
                stream: layout.checkpointStream, subject: layout.checkpointHeadSubject(partition: partition))
        else { return nil }
        guard case .object(let o)? = try? JSON.parse(head.payload), case .string(let text)? = o["covered"] else {
            return nil
        }
        return UInt64(text)
    }

    /// The partition's last checkpoint, or nil when it has none. Throws `NATSError`, or `Corrupt` when the
    /// head or its chunks are not what a checkpoint writes (the caller says so and starts from nothing rather
    /// than trust it).
    ///
    /// `timeout` bounds the whole read (nil: each request its `requestTimeout`).
    package func read(partition: Int, timeout: Duration? = nil) throws -> Stored? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        func left() -> Duration? { deadline.map { max(.milliseconds(1), $0 - ContinuousClock.now) } }
        guard
            let head = try connection.lastMessage(
                stream: layout.checkpointStream, subject: layout.checkpointHeadSubject(partition: partition),
                timeout: left())
        else { return nil }
        guard case .object(let o)? = try? JSON.parse(head.payload),
            case .number(let firstNumber)? = o["first"], case .number(let chunkNumber)? = o["chunks"],
            case .number(let byteNumber)? = o["bytes"], case .string(let coveredText)? = o["covered"],
            case .string(let termText)? = o["term"], case .string(let owner)? = o["owner"],
            let covered = UInt64(coveredText), let term = UInt64(termText),
            firstNumber >= 1, firstNumber < 9e15, chunkNumber >= 1, chunkNumber <= 100_000,
            byteNumber >= 0, byteNumber <= 64 * 1024 * 1024 * 1024
        else { throw Corrupt(description: "the checkpoint head of partition \(partition) is not readable") }
        let first = UInt64(firstNumber)
        let chunks = Int(chunkNumber)
        let total = Int(byteNumber)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(total)
        var sequence = first
        var found = 0
        let dataSubject = layout.checkpointDataSubject(partition: partition)
        // The chunks are the first `chunks` messages on the data subject from `first` on (another partition's
        // or a torn checkpoint's messages may lie between them).
        while found < chunks {
            guard sequence < head.sequence else {
                throw Corrupt(description: "partition \(partition)'s checkpoint misses chunks")
            }
            if let deadline, ContinuousClock.now >= deadline {
                throw NATSError(
                    kind: .timeout, operation: "read the checkpoint of partition \(partition)",
                    text: "not read within the time given")
            }
            if let message = try connection.message(
                stream: layout.checkpointStream, sequence: sequence, timeout: left()),
                message.subject == dataSubject
            {
                bytes += message.payload
                found += 1
            }
            sequence += 1
        }
        guard bytes.count == total else {
            throw Corrupt(description: "partition \(partition)'s checkpoint has \(bytes.count) bytes, not \(total)")
        }
        return Stored(covered: covered, term: term, owner: owner, bytes: bytes, headSequence: head.sequence)
    }
}

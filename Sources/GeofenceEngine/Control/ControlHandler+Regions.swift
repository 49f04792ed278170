import Foundation
import GeofenceCore
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

extension ControlHandler {
    // MARK: Streamed lists, imports in parts

    /// `list` and `export` with `stream`: one line per region, read from the store a page at a time and
    /// written as the client takes them, so that neither end holds a million regions; the answer that
    /// follows them says how many.
    func stream(to connection: ControlConnection, _ encode: (StoredRegion) -> JSONObject) throws -> JSONValue {
        var count = 0
        var after: Int64 = 0
        while true {
            let page = try store.regions.page(afterSeq: after, limit: 1000)
            guard let last = page.last else { break }
            // A page in one write: a million writes of one line each cost more than the lines.
            let lines = page.map { JSONValue.object(encode($0)).serialized() }.joined(separator: "\n")
            guard connection.send(lines) else { throw ControlError(.unavailable, "the client went away") }
            count += page.count
            after = last.seq
        }
        return ["count": .number(Double(count))]
    }

    /// `import`: all or nothing, in parts over one connection when the file is bigger than one request
    /// line (`final: false` for every part but the last). Each part is checked as it arrives (positions count
    /// from the first part) and, while every entry so far is good, stored at once in a transaction of the
    /// import's own, which the final part commits; any problem, a refusal or the client going away rolls it
    /// back, and the final part's answer says why. `replace` and `dryRun` are the first part's.
    func importRegions(_ p: JSONObject, peer: ControlPeer, connection: ControlConnection?) throws -> JSONValue {
        let final = p["final"]?.boolValue ?? true
        if !final && connection == nil {
            throw ControlError(.badRequest, "a partial import needs a connection")
        }
        // Taken out of the connection while this part is handled (one copy only, so that adding to what it
        // holds copies nothing).
        var state = (connection?[ImportInProgress.key] as? ImportInProgress) ?? startImport(p, peer: peer)
        connection?[ImportInProgress.key] = nil
        state.receive(p, handler: self, peer: peer)
        if !final {
            if let connection { connection[ImportInProgress.key] = state }
            if let refusal = state.refusal { throw refusal }
            return ["staged": .number(Double(state.decoder.count))]
        }
        return try state.finish(handler: self, peer: peer)
    }

    /// The import a first part begins. One that breaks the protocol (no `regions`) still begins one, refused
    /// by `receive`: kept on the connection, it fails every later part and the final one, so that the rest
    /// is not taken for a new import and committed without it.
    func startImport(_ p: JSONObject, peer: ControlPeer) -> ImportInProgress {
        var state = ImportInProgress(
            decoder: RegionEntryDecoder(now: Date(), createdBy: peer.uid), replace: p["replace"]?.boolValue ?? false,
            dryRun: p["dryRun"]?.boolValue ?? false)
        do {
            state.request = try requestRecord(p, .importRegions, peer: peer)
            if let request = state.request, !state.dryRun { state.recorded = try recordedAnswer(request) }
        } catch {
            state.refusal = ControlHandler.translate(error)
        }
        if !state.dryRun && p["regions"]?.arrayValue != nil && state.recorded == nil && state.refusal == nil {
            do {
                state.storing = try RegionImport(store: store, replace: state.replace, now: state.decoder.now)
            } catch {
                state.refusal = ControlHandler.translate(error)
            }
        }
        return state
    }

    /// An import in parts, between its first part and its final one.
    struct ImportInProgress: ControlConnectionState {
        static let key = "import"
        var decoder: RegionEntryDecoder
        let replace: Bool
        let dryRun: Bool
        /// The open transaction the parts go into while all is well; nil once anything is wrong (or in a
        /// dry run).
        var storing: RegionImport?
        /// What fails the import regardless of its entries (a part that breaks the protocol, the store
        /// failing); the first one wins.
        var refusal: ControlError?
        /// A region with hooks from a client the engine takes none from: reported unless entries are bad.
        var hookRefusal: ControlError?
        var parts = 0
        /// The id the import is recorded under when it commits.
        var request: RequestRecord?
        /// The answer of the same import made before (its parts are then only read, not stored again).
        var recorded: JSONValue?

        func connectionClosed() { storing?.rollback() }

        /// A line of the connection could not be read: perhaps one of the import's parts, so the import
        /// cannot be complete.
        mutating func requestUnreadable() {
            refuse(
                ControlError(
                    .badRequest, "a request line sent during the import could not be read: nothing is imported"))
        }

        /// Checks one part and stores its regions while everything so far is good.
        mutating func receive(_ p: JSONObject, handler: ControlHandler, peer: ControlPeer) {
            parts += 1
            guard refusal == nil, recorded == nil else { return }
            guard let part = p["regions"]?.arrayValue else {
                return refuse(ControlError(.badRequest, "import needs params.regions (part \(parts) has none)"))
            }
            for (flag, value) in [("replace", replace), ("dryRun", dryRun)] {
                if let given = p[flag], given.boolValue != value {
                    return refuse(
                        ControlError(
                            .badRequest,
                            "import part \(parts) gives \(flag): \(given.serialized()), but the import began with "
                                + "\(flag): \(value); send the same replace and dryRun with every part"))
                }
            }
            decoder.add(part)
            let regions = decoder.takeRegions()
            if hookRefusal == nil, regions.contains(where: { !$0.hooks.isEmpty }) {
                do { try handler.checkHookOwner(peer.uid) } catch { hookRefusal = ControlHandler.translate(error) }
            }
            guard let storing else { return }
            guard decoder.problems.isEmpty, hookRefusal == nil else {
                // It cannot succeed now: let go of the write lock at once, and only check the rest.
                storing.rollback()
                self.storing = nil
                return
            }
            do {
                try storing.add(regions)
            } catch {
                refuse(ControlHandler.translate(error))
            }
        }

        private mutating func refuse(_ error: ControlError) {
            if refusal == nil { refusal = error }
            storing?.rollback()
            storing = nil
        }

        /// The final part's answer: committed, or why nothing was stored.
        func finish(handler: ControlHandler, peer: ControlPeer) throws -> JSONValue {
            defer { storing?.rollback() }
            if let refusal { throw refusal }
            if let recorded { return recorded }
            if !decoder.problems.isEmpty {
                let problems = decoder.problems
                throw ControlError(
                    .invalid,
                    problems.count == 1
                        ? "nothing imported: \(problems[0])"
                        : "nothing imported: \(problems.count) problems\n"
                            + problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
                            + (problems.count > 50 ? "\n  ... and \(problems.count - 50) more" : ""))
            }
            if let hookRefusal { throw hookRefusal }
            let count = JSONValue.number(Double(decoder.count))
            if dryRun { return ["checked": count, "imported": 0] }
            guard let storing else { throw ControlError(.internalError, "the import was not being stored") }
            let answer: JSONValue = ["checked": count, "imported": count]
            do {
                if let request {
                    try storing.commit(request: request, answer: answer.serialized())
                } else {
                    try storing.commit()
                }
            } catch {
                throw ControlHandler.translate(error)
            }
            handler.changed(.regions)
            return answer
        }
    }
}

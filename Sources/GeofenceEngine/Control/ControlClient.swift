import Foundation
import GeofenceCore

#if canImport(Glibc)
    import Glibc
#endif

/// The CLI's side of the control socket.
package struct ControlClient: Sendable {
    package let path: String
    /// The error message when a request was sent and the engine went away before answering it: a change
    /// may then have been applied or not.
    package static let noAnswer = "the engine closed the connection without an answer"
    /// The error message when the engine went away before the last of several request lines was sent
    /// (`call(lines:)`): the last one, which may be the one that commits, never reached it.
    package static let closedEarly = "the engine closed the connection before the last request was sent"

    package init(path: String) { self.path = path }

    /// Whether something accepts connections at `path` (a running engine).
    package static func isListening(_ path: String) -> Bool {
        guard let fd = try? connect(path) else { return false }
        close(fd)
        return true
    }

    /// What answers at a socket path when asked `hello`.
    package enum Greeting: Sendable {
        /// Nothing listens there.
        case nobody
        /// An engine, and what it says of itself (`stateDirectory`, `pid`, `version`, ...).
        case engine(JSONObject)
        /// Something listens but refused (`busy`) or did not answer as an engine does.
        case refused(ControlError)
    }

    /// Asks whoever listens at `path` which engine it is.
    package static func greet(_ path: String) -> Greeting {
        guard let fd = try? connect(path) else { return .nobody }
        defer { close(fd) }
        // A client turned away (`busy`) is answered before its request is read, and may find the connection
        // closed when it sends: the answer is still there to read.
        _ = writeLine(ControlRequest(method: .hello).line, to: fd)
        var reader = LineReader(fd: fd, maximumLength: 1 << 20)
        guard let line = try? reader.next(), let response = ControlResponse.parse(line) else {
            return .refused(ControlError(.unavailable, "the engine at \(path) closed the connection without an answer"))
        }
        switch response.result {
        case .success(let value):
            guard let o = value.objectValue, o["stateDirectory"]?.stringValue != nil else {
                return .refused(ControlError(.unavailable, "\(path) does not answer as a geofence engine does"))
            }
            return .engine(o)
        case .failure(let error):
            return .refused(error)
        }
    }

    static func connect(_ path: String) throws(ControlError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlError(.unavailable, "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw ControlError(.unavailable, "control socket path is too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard ok == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ControlError(.unavailable, "cannot connect to the engine at \(path): \(reason)")
        }
        return fd
    }

    /// Sends requests on one connection and returns their responses, in order, each read before the next
    /// is sent (an answer may be large: `export`).
    package func call(_ requests: [ControlRequest]) throws(ControlError) -> [ControlResponse] {
        let fd = try ControlClient.connect(path)
        defer { close(fd) }
        var responses: [ControlResponse] = []
        var reader = LineReader(fd: fd, maximumLength: 64 << 20)
        for request in requests {
            let sent = writeLine(request.line, to: fd)
            // Unsent, there may still be an answer: the `busy` of a client turned away.
            guard let response = try? ControlClient.response(from: &reader) else {
                throw ControlError(
                    .unavailable,
                    sent
                        ? ControlClient.noAnswer : "the engine closed the connection")
            }
            responses.append(response)
        }
        return responses
    }

    /// Sends request lines (serialized requests, without the newline) on one connection without waiting
    /// for each answer, then returns the answers, in order: the engine works on one while the next is made
    /// (lines are produced as they are sent). For a long run of requests whose answers only matter together,
    /// such as the parts of an import. The engine answers every line, so the answers fit its socket buffer.
    package func call(lines: some Sequence<String>) throws(ControlError) -> [ControlResponse] {
        let fd = try ControlClient.connect(path)
        defer { close(fd) }
        var sent = 0
        var reader = LineReader(fd: fd, maximumLength: 64 << 20)
        for line in lines {
            guard writeLine(line, to: fd) else {
                // Closed on us: the engine's answers so far say why (`busy`, or a part it refused).
                var responses: [ControlResponse] = []
                while let response = try? ControlClient.response(from: &reader) { responses.append(response) }
                if responses.contains(where: { if case .failure = $0.result { true } else { false } }) {
                    return responses
                }
                throw ControlError(.unavailable, ControlClient.closedEarly)
            }
            sent += 1
        }
        var responses: [ControlResponse] = []
        for _ in 0..<sent { responses.append(try ControlClient.response(from: &reader)) }
        return responses
    }

    /// Reads the next answer.
    private static func response(from reader: inout LineReader) throws(ControlError) -> ControlResponse {
        guard let line = try? reader.next(), let response = ControlResponse.parse(line) else {
            throw ControlError(.unavailable, ControlClient.noAnswer)
        }
        return response
    }

    /// Sends one request whose answer comes in lines (`list` and `export` with `stream`): each line that is
    /// not an answer goes to `item` as it arrives; returns the answer that ends them (or the refusal that
    /// comes instead).
    package func streamed(_ request: ControlRequest, _ item: (ArraySlice<UInt8>) throws -> Void) throws
        -> ControlResponse
    {
        let fd = try ControlClient.connect(path)
        defer { close(fd) }
        _ = writeLine(request.line, to: fd)
        var reader = LineReader(fd: fd, maximumLength: 16 << 20)
        let answer = Array(#"{"ok":"#.utf8)
        while let line = try? reader.next() {
            if line.starts(with: answer) {
                guard let response = ControlResponse.parse(line) else { break }
                return response
            }
            try item(line)
        }
        throw ControlError(.unavailable, ControlClient.noAnswer)
    }

    /// Sends one request and calls `body` with each line the engine streams back, until it returns false
    /// or the engine closes the connection (`watch`).
    package func stream(_ request: ControlRequest, _ body: (String) -> Bool) throws(ControlError) {
        let fd = try ControlClient.connect(path)
        defer { close(fd) }
        _ = writeLine(request.line, to: fd)
        var reader = LineReader(fd: fd, maximumLength: 64 << 20)
        while let line = try? reader.next() {
            if !body(String(decoding: line, as: UTF8.self)) { return }
        }
    }
}

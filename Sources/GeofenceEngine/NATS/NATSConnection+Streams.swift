import CNATS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension NATSConnection {
    /// A stream as JetStream describes it now.
    package struct StreamInfo: Equatable, Sendable {
        package let name: String
        package let subjects: [String]
        package let replicas: Int
        /// How long a `Nats-Msg-Id` is remembered for de-duplication.
        package let duplicateWindow: Duration
        /// Messages stored now.
        package let messages: UInt64
        /// The sequence of the first message kept (older ones aged out or were purged).
        package let firstSequence: UInt64
        /// The sequence of the last message stored (0: none yet).
        package let lastSequence: UInt64
        /// The name of the server leading the stream's replicas now (empty: none, or not clustered).
        package let leader: String
        /// How long the stream keeps a message (nil: no age limit).
        package var maxAge: Duration? = nil
        /// Subjects with at least one message stored (a KV bucket's keys, delete markers included).
        package var subjectCount: UInt64 = 0
    }

    /// The stream `name`, created with `subjects`, `replicas` (3 in a 3-server cluster), `duplicateWindow` and
    /// `maxAge` (nil: kept until other limits) on file storage if it does not exist. An existing stream is
    /// left as it is (its settings are in the answer, for the caller to check). **Blocks** for one or two
    /// JetStream requests.
    package func ensureStream(
        name: String, subjects: [String], replicas: Int, duplicateWindow: Duration, maxAge: Duration? = nil
    ) throws -> StreamInfo {
        if let existing = try streamInfo(name: name) { return existing }
        let copies = subjects.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        var pointers = copies.map { UnsafePointer<CChar>($0) }
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = name.withCString { cName in
            pointers.withUnsafeMutableBufferPointer { list in
                config.Name = cName
                config.Subjects = list.baseAddress
                config.SubjectsLen = Int32(list.count)
                config.Replicas = Int64(clamping: replicas)
                config.Duplicates = natsNanoseconds(duplicateWindow)
                config.MaxAge = maxAge.map(natsNanoseconds) ?? 0
                config.Storage = js_FileStorage
                return js_AddStream(&info, jetStream, &config, nil, &code)
            }
        }
        defer { jsStreamInfo_Destroy(info) }
        // Another engine created it meanwhile (with other settings: the name is taken): take what is there.
        if code == JSStreamNameExistErr, let existing = try streamInfo(name: name) { return existing }
        guard status == NATS_OK, let info else {
            throw NATSError.from(status, jetStreamCode: code, operation: "create stream \(name)")
        }
        return Self.streamInfo(info)
    }

    /// The stream `name` now, or nil when there is none. **Blocks** for one JetStream request.
    package func streamInfo(name: String) throws -> StreamInfo? {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = js_GetStreamInfo(&info, jetStream, name, nil, &code)
        defer { jsStreamInfo_Destroy(info) }
        if status == NATS_NOT_FOUND || code == JSStreamNotFoundErr { return nil }
        guard status == NATS_OK, let info else {
            throw NATSError.from(status, jetStreamCode: code, operation: "stream \(name)")
        }
        return Self.streamInfo(info)
    }

    private static func streamInfo(_ info: UnsafeMutablePointer<jsStreamInfo>) -> StreamInfo {
        let config = info.pointee.Config?.pointee
        var subjects: [String] = []
        if let config, let list = config.Subjects {
            for index in 0..<Int(max(0, config.SubjectsLen)) {
                if let subject = list[index] { subjects.append(String(cString: subject)) }
            }
        }
        return StreamInfo(
            name: config?.Name.map { String(cString: $0) } ?? "", subjects: subjects,
            replicas: Int(clamping: config?.Replicas ?? 0),
            duplicateWindow: .nanoseconds(config?.Duplicates ?? 0), messages: info.pointee.State.Msgs,
            firstSequence: info.pointee.State.FirstSeq, lastSequence: info.pointee.State.LastSeq,
            leader: info.pointee.Cluster?.pointee.Leader.map { String(cString: $0) } ?? "",
            maxAge: (config?.MaxAge ?? 0) > 0 ? .nanoseconds(config?.MaxAge ?? 0) : nil,
            subjectCount: UInt64(clamping: info.pointee.State.NumSubjects))
    }

    /// A message as stored in a stream.
    package struct StoredMessage: Equatable, Sendable {
        package let subject: String
        package let sequence: UInt64
        package let payload: [UInt8]
        /// Each header's values, in the order they were added.
        package let headers: [String: [String]]
        /// When the stream stored it (nanoseconds since 1970; 0 when the server did not say).
        package var storedNanoseconds: Int64 = 0

        /// When the stream stored it, or nil when the server did not say.
        package var stored: Date? {
            storedNanoseconds > 0 ? Date(timeIntervalSince1970: Double(storedNanoseconds) / 1e9) : nil
        }
    }

    /// The last message on `subject` in `stream`, or nil when the subject has none. **Blocks** for one
    /// JetStream request, at most `timeout` (nil: `requestTimeout`).
    package func lastMessage(stream: String, subject: String, timeout: Duration? = nil) throws -> StoredMessage? {
        var message: OpaquePointer?
        var code = jsErrCode(0)
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = max(1, natsMilliseconds(timeout ?? requestTimeout))
        let status = js_GetLastMsg(&message, jetStream, stream, subject, &options, &code)
        defer { natsMsg_Destroy(message) }
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else {
            throw NATSError.from(status, jetStreamCode: code, operation: "last message on \(subject) in \(stream)")
        }
        return StoredMessage(
            subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? subject,
            sequence: natsMsg_GetSequence(message), payload: Self.payload(of: message),
            headers: Self.headers(of: message), storedNanoseconds: natsMsg_GetTime(message))
    }

    static func payload(of message: OpaquePointer) -> [UInt8] {
        let count = Int(max(0, natsMsg_GetDataLength(message)))
        guard count > 0, let data = natsMsg_GetData(message) else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: count) {
            Array(UnsafeBufferPointer(start: $0, count: count))
        }
    }

    static func headers(of message: OpaquePointer) -> [String: [String]] {
        var keys: UnsafeMutablePointer<UnsafePointer<CChar>?>?
        var count: Int32 = 0
        guard natsMsgHeader_Keys(message, &keys, &count) == NATS_OK, let keys else { return [:] }
        defer { free(keys) }
        var headers: [String: [String]] = [:]
        for index in 0..<Int(max(0, count)) {
            guard let key = keys[index] else { continue }
            var values: UnsafeMutablePointer<UnsafePointer<CChar>?>?
            var valueCount: Int32 = 0
            guard natsMsgHeader_Values(message, key, &values, &valueCount) == NATS_OK, let values else { continue }
            defer { free(values) }
            headers[String(cString: key)] = (0..<Int(max(0, valueCount))).compactMap {
                values[$0].map { String(cString: $0) }
            }
        }
        return headers
    }
}

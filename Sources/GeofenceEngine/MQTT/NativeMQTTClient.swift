import Foundation
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// geofence's own MQTT 3.1.1 client over plain TCP, for fleets: a persistent session (clean session off),
/// QoS 1 both ways, reconnection with backoff, keep-alive.
///
/// Why not libmosquitto here: libmosquitto 2.0 reads a subscriber's messages one packet per `pselect`,
/// each in four `read`s, and writes every PUBACK on its own after waking its thread through a socket
/// pair: eight system calls a message, which capped the source near 64,000 fixes a second on two cores.
/// This client reads up to 64 KiB at a time, splits it into packets (`MQTTPacketReader`), hands each
/// message to the handler, then writes every acknowledgement the read produced in one `write`; the
/// messages a sink publishes between two reads also go out in one `write`.
///
/// One thread (`geofence.mqtt`) owns the socket: it connects, reads, writes, pings and reconnects, and
/// calls the handler, in order. `publish` may be called from any thread, the handler's included: it
/// queues the packet under `lock` and wakes the thread through a pipe (only when the thread is not
/// already awake and about to write). Unacknowledged messages are kept and sent again, with DUP set,
/// after a reconnection, until the broker's PUBACK; at most `sendMaximum` are in flight, the rest wait in
/// order. An incoming QoS 1 message is acknowledged once the handler has returned: a handler that waits
/// holds the broker back (its in-flight window) rather than filling memory. With `deferAcknowledgements`,
/// only when `acknowledge` is called with its receipt (the MQTT source, once its fix is committed).
package final class NativeMQTTClient: MQTTClient, @unchecked Sendable {
    // @unchecked: every mutable field is guarded by `lock`, but for `socketState`, the I/O thread's own.
    private let options: MQTTOptions
    private let handler: @Sendable (MQTTEvent) -> Void
    /// The longest packet kept whole: a gpsd report is at most 64 KiB, and a topic 64 KiB.
    static let maximumPacket = 192 * 1024
    static let readSize = 64 * 1024

    private struct Outgoing {
        var packet: [UInt8]
        var serial: Int
        var sent: Bool
    }

    private let lock = NSCondition()
    /// Bytes for the socket, in order: written by the I/O thread.
    private var output: [UInt8] = []
    private var inFlight: [UInt16: Outgoing] = [:]
    /// Published beyond `sendMaximum`, waiting for room, in order.
    private var waiting: [(id: UInt16, packet: [UInt8])] = []
    private var waitingHead = 0
    private var waitingIDs: Set<UInt16> = []
    private var serial = 0
    private var lastID: UInt16 = 0
    private var subscribeID: UInt16?
    /// Connections accepted so far: the number in the receipts of this one's messages.
    private var connection = 0
    /// The broker has accepted this connection (CONNACK 0) and it is not lost yet.
    private var online = false
    private var wakePending = false
    private var stopping = false
    private var running = false
    private var finished = false
    /// The first connection's outcome, for `start`.
    private var firstAnswer: Result<Void, MQTTError>?
    private var thread: pthread_t?
    private let wakeRead: Int32
    private let wakeWrite: Int32

    package init(options: MQTTOptions, handler: @escaping @Sendable (MQTTEvent) -> Void) {
        self.options = options
        self.handler = handler
        // A socket pair rather than a pipe: made close-on-exec at once, so a hook spawned meanwhile never
        // inherits it.
        var pipeEnds: [Int32] = [-1, -1]
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        if socketpair(AF_UNIX, kind, 0, &pipeEnds) != 0 { pipeEnds = [-1, -1] }
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
    }

    deinit {
        stop()
        if wakeRead >= 0 { close(wakeRead) }
        if wakeWrite >= 0 { close(wakeWrite) }
    }

    package var address: String { "\(options.host):\(options.port)" }

    /// Held in a dictionary by packet id: a thousand cost no more than a hundred, and keep a broker on
    /// loopback busy (with 128 the engine woke for every few PUBACKs: 13 µs of CPU a message against 7-8).
    var preferredWindow: Int { 1_000 }

    package func start(timeout: Double) throws(MQTTError) {
        guard wakeRead >= 0 else {
            throw MQTTError(description: "cannot make an MQTT client: \(String(cString: strerror(errno)))")
        }
        // CONNECT's strings and binary fields say their length in two bytes (§1.5.3).
        let fields = [
            ("client id", options.clientID), ("user name", options.username), ("password", options.password),
            ("last will's topic", options.will?.topic), ("last will", options.will?.payload),
        ]
        for case let (name, value?) in fields where value.utf8.count > 65_535 {
            throw MQTTError(
                description: "cannot connect to the MQTT broker at \(address): the \(name) is over 65,535 bytes")
        }
        lock.withLock { running = true }
        let worker = Thread { [self] in run(firstTimeout: timeout) }
        worker.name = "geofence.mqtt"
        worker.stackSize = 1 << 20
        worker.start()
        let answer: Result<Void, MQTTError>? = lock.withLock {
            let deadline = Date().addingTimeInterval(timeout + 1)
            while firstAnswer == nil, lock.wait(until: deadline) {}
            return firstAnswer
        }
        switch answer {
        case .success: return
        case .failure(let error):
            stop()
            throw error
        case nil:
            stop()
            throw MQTTError(description: "the MQTT broker at \(address) did not answer within \(Int(timeout)) s")
        }
    }

    package func stop() {
        let wasRunning = lock.withLock {
            defer { stopping = true }
            return running && !stopping
        }
        if wasRunning { wake() }
        // From the handler (its own thread), the thread ends after the handler returns.
        if lock.withLock({ onOwnThread }) { return }
        // Else until the thread has ended, so that no handler runs after `stop`; but for at most 5 s: a
        // thread stuck in a name look-up (a DNS outage) must not hold the engine's stop. It ends on its own
        // when the look-up returns, and calls no handler after seeing `stopping`.
        let deadline = Date().addingTimeInterval(5)
        lock.withLock {
            while running && !finished && lock.wait(until: deadline) {}
        }
    }

    package func publish(topic: String, payload: [UInt8], retain: Bool) throws(MQTTError) -> Int32 {
        if let problem = MQTTPacket.problem(publishingTo: topic) {
            throw MQTTError(description: "cannot publish to \(topic): \(problem)")
        }
        let topicBytes = Array(topic.utf8)
        guard 2 + topicBytes.count + 2 + payload.count <= MQTTPacket.maximumRemainingLength else {
            throw MQTTError(description: "cannot publish to \(topic): a payload of \(payload.count) bytes is too large")
        }
        lock.lock()
        guard let id = freeID() else {
            lock.unlock()
            throw MQTTError(description: "cannot publish to \(topic): 65,535 messages are unacknowledged")
        }
        let packet = MQTTPacket.publishPacket(topic: topicBytes, payload: payload, id: id, retain: retain)
        var wakeNeeded = false
        if inFlight.count < Int(options.sendMaximum) && waitingHead == waiting.count {
            serial += 1
            inFlight[id] = Outgoing(packet: packet, serial: serial, sent: online)
            if online {
                output.append(contentsOf: packet)
                wakeNeeded = !wakePending && !onOwnThread
                if wakeNeeded { wakePending = true }
            }
        } else {
            waiting.append((id, packet))
            waitingIDs.insert(id)
        }
        lock.unlock()
        if wakeNeeded { wake() }
        return Int32(id)
    }

    package func acknowledge(_ receipts: [MQTTReceipt]) {
        guard !receipts.isEmpty else { return }
        lock.lock()
        // Those of a connection lost are the broker's to send again (DUP): a PUBACK now would name a packet
        // id the new connection may use for another message.
        var any = false
        for receipt in receipts where receipt.connection == connection && online {
            MQTTPacket.appendAcknowledgement(MQTTPacket.puback, id: receipt.packetID, to: &output)
            any = true
        }
        let wakeNeeded = any && !wakePending && !onOwnThread
        if wakeNeeded { wakePending = true }
        lock.unlock()
        if wakeNeeded { wake() }
    }

    // MARK: - The I/O thread

    private var onOwnThread: Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    private func wake() {
        var byte: UInt8 = 1
        // Non-blocking: a full socket pair (EAGAIN) already holds a wake-up.
        System.retryingEINTR { write(wakeWrite, &byte, 1) }
    }

    /// Under `lock`: the next packet identifier no unacknowledged packet holds.
    private func freeID() -> UInt16? {
        for _ in 0..<65_535 {
            lastID = lastID == UInt16.max ? 1 : lastID + 1
            if inFlight[lastID] == nil, !waitingIDs.contains(lastID), lastID != subscribeID { return lastID }
        }
        return nil
    }

    private enum Ending {
        /// `stop()`: DISCONNECT sent, or the connection was not up.
        case stopped
        /// The broker could not be reached, or did not answer the connection.
        case unreachable(String)
        /// The broker answered the connection with a refusal.
        case refused(String)
        /// An accepted connection went away.
        case lost(String)
    }

    private func run(firstTimeout: Double) {
        nameThisThread("geofence.mqtt")
        lock.withLock { thread = pthread_self() }
        defer {
            lock.withLock {
                online = false
                finished = true
                lock.broadcast()
            }
        }
        // At least 0.1 s between attempts, whatever the options say: never a busy loop against a broker away.
        let firstDelay = max(Double(options.reconnectDelay), 0.1)
        var delay = firstDelay
        var first = true
        while true {
            let ending = session(connectTimeout: first ? firstTimeout : max(10, Double(options.keepalive)))
            let wasFirst = lock.withLock {
                defer { first = false }
                if first, firstAnswer == nil {
                    switch ending {
                    case .stopped: firstAnswer = .failure(MQTTError(description: "stopped while connecting"))
                    case .unreachable(let why):
                        firstAnswer = .failure(
                            MQTTError(description: "cannot connect to the MQTT broker at \(address): \(why)"))
                    case .refused(let why):
                        firstAnswer = .failure(
                            MQTTError(description: "the MQTT broker at \(address) refused the connection: \(why)"))
                    case .lost:
                        // Accepted, then lost: `start` has its answer already.
                        break
                    }
                    lock.broadcast()
                    return firstAnswer.map { if case .failure = $0 { true } else { false } } ?? false
                }
                return false
            }
            // A first connection that fails is `start`'s error to throw; the thread is not wanted after it.
            if wasFirst { return }
            switch ending {
            case .stopped: return
            case .lost(let why):
                delay = firstDelay
                handler(.disconnected(why))
            case .unreachable(let why): handler(.disconnected("the broker cannot be reached: \(why)"))
            case .refused(let why): handler(.refused(why))
            }
            if pause(seconds: delay) { return }
            delay = min(delay * 2, max(Double(options.reconnectDelayMax), firstDelay))
        }
    }

    /// Waits `seconds` unless stopped meanwhile; true: stopped.
    private func pause(seconds: Double) -> Bool {
        let deadline = MonotonicClock.seconds() + seconds
        while true {
            if lock.withLock({ stopping }) { return true }
            let left = deadline - MonotonicClock.seconds()
            if left <= 0 { return false }
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            // A poll that fails is a wait cut short: the loop looks at the time and the stop again.
            _ = try? System.poll(&fds, milliseconds: Int32(min(left, 1) * 1000) + 1)
            drainWake()
        }
    }

    private func drainWake() {
        BrokerDialer.drain(wakeRead)
    }

    /// One connection: dial, CONNECT, then read and write until it ends.
    private func session(connectTimeout: Double) -> Ending {
        // One deadline for the TCP connection and the CONNACK together, as `start` waits.
        let answerBy = MonotonicClock.seconds() + connectTimeout
        let socket: Int32
        let dialed = BrokerDialer.dial(
            host: options.host, port: options.port, timeout: connectTimeout, wake: wakeRead,
            stopped: { lock.withLock { stopping } })
        switch dialed {
        case .success(let fd): socket = fd
        case .failure(let why): return lock.withLock { stopping } ? .stopped : .unreachable(why.description)
        }
        defer {
            close(socket)
            // What was queued for this connection is in `inFlight`, sent again at the next one.
            lock.withLock {
                online = false
                output.removeAll(keepingCapacity: true)
            }
        }
        var reader = MQTTPacketReader(maximumLength: Self.maximumPacket)
        var pending = MQTTPacket.connectPacket(
            clientID: options.clientID, cleanSession: false, keepalive: UInt16(min(max(options.keepalive, 1), 65_535)),
            username: options.username, password: options.password,
            will: options.will.map { .init(topic: $0.topic, payload: Array($0.payload.utf8), retain: $0.retain) })
        var written = 0
        var accepted = false
        // As the broker holds us to it: what CONNECT says, at least 1 s (0 would mean no keep-alive at all).
        let keepalive = Double(min(max(options.keepalive, 1), 65_535))
        var lastSent = MonotonicClock.seconds()
        var lastHeard = MonotonicClock.seconds()
        var chunk = [UInt8](repeating: 0, count: Self.readSize)
        var acknowledgements: [UInt8] = []
        var stopRequested = false
        var connectionNumber = -1

        func flush() -> String? {
            while written < pending.count {
                let n = System.retryingEINTR {
                    pending.withUnsafeBytes { Self.send(socket, $0.baseAddress! + written, $0.count - written) }
                }
                if n > 0 {
                    written += n
                    lastSent = MonotonicClock.seconds()
                } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    // A broker that reads slowly: what it took is dropped now, not once all is written.
                    if written >= 1 << 16 {
                        pending.removeFirst(written)
                        written = 0
                    }
                    return nil
                } else {
                    return String(cString: strerror(errno))
                }
            }
            pending.removeAll(keepingCapacity: true)
            written = 0
            return nil
        }

        while true {
            // What other threads queued, behind what this one has not written yet.
            lock.withLock {
                if accepted && !output.isEmpty {
                    pending.append(contentsOf: output)
                    output.removeAll(keepingCapacity: true)
                }
                wakePending = false
                if stopping { stopRequested = true }
            }
            if stopRequested {
                if accepted { farewell(socket, pending: Array(pending[written...])) }
                return .stopped
            }
            let now = MonotonicClock.seconds()
            if accepted {
                if now - lastHeard > keepalive * 1.5 {
                    return .lost("the broker did not answer for \(Int(keepalive * 1.5)) s")
                }
                if now - lastSent >= keepalive && pending.isEmpty {
                    pending = [MQTTPacket.pingreq, 0]
                }
            } else if now > answerBy {
                return .unreachable("no answer to the connection within \(Int(connectTimeout)) s")
            }
            if let why = flush() { return accepted ? .lost(why) : .unreachable(why) }
            // (A ping waits for the socket to take what is pending: no timer for it meanwhile, or the loop would
            // spin once a millisecond.)
            let pingDue = pending.isEmpty ? lastSent + keepalive : Double.infinity
            let nextTimer = accepted ? min(pingDue, lastHeard + keepalive * 1.5) : answerBy
            let timeout = Int32(max(0, min(nextTimer - MonotonicClock.seconds(), 1)) * 1000) + 1
            var fds = [
                pollfd(fd: socket, events: Int16(POLLIN) | (pending.isEmpty ? 0 : Int16(POLLOUT)), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            do throws(SystemError) {
                _ = try System.poll(&fds, milliseconds: timeout)
            } catch {
                return .lost(error.reason)
            }
            if fds[1].revents != 0 { drainWake() }
            guard fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
            let n = System.retryingEINTR { chunk.withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) } }
            if n == 0 {
                let why = "the broker closed the connection"
                return accepted ? .lost(why) : .unreachable(why)
            }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { continue }
                let why = String(cString: strerror(errno))
                return accepted ? .lost(why) : .unreachable(why)
            }
            lastHeard = MonotonicClock.seconds()
            chunk.withUnsafeBytes { reader.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            while true {
                let packet: MQTTPacketReader.Packet?
                do throws(MQTTPacketReader.Malformed) {
                    packet = try reader.next()
                } catch {
                    return .lost("the broker sent \(error.description)")
                }
                guard let packet else { break }
                if !accepted, case .connack = packet {
                } else if !accepted {
                    return .unreachable("the broker sent a packet before its CONNACK")
                }
                switch packet {
                case .connack(_, let code):
                    guard !accepted else { return .lost("the broker sent a second CONNACK") }
                    guard code == 0 else { return .refused(MQTTPacket.refusal(code)) }
                    accepted = true
                    pending.append(contentsOf: connected())
                    connectionNumber = lock.withLock { connection }
                    handler(.connected)
                case .publish(let topic, let payload, let id, let qos, let tooLong):
                    // Acknowledged by `acknowledge`, when the source has committed its fix.
                    let receipt =
                        options.deferAcknowledgements && qos == 1
                        ? id.map { MQTTReceipt(connection: connectionNumber, packetID: $0) } : nil
                    if let tooLong {
                        handler(.tooLong(topic: topic, bytes: tooLong, receipt: receipt))
                    } else {
                        handler(.message(topic: topic, payload: payload, receipt: receipt))
                    }
                    if let id, qos == 1, receipt == nil {
                        MQTTPacket.appendAcknowledgement(MQTTPacket.puback, id: id, to: &acknowledgements)
                    }
                    if let id, qos == 2 {
                        MQTTPacket.appendAcknowledgement(MQTTPacket.pubrec, id: id, to: &acknowledgements)
                    }
                case .pubrel(let id):
                    MQTTPacket.appendAcknowledgement(MQTTPacket.pubcomp, id: id, to: &acknowledgements)
                case .puback(let id):
                    if acknowledged(id) { handler(.published(Int32(id))) }
                case .suback(let id, let codes):
                    let refused = lock.withLock {
                        defer { if id == subscribeID { subscribeID = nil } }
                        return id == subscribeID && codes.contains(0x80)
                    }
                    if refused, let filter = options.topicFilter {
                        handler(.refused("the broker refused the subscription to \(filter)"))
                    }
                case .pubrec, .pubcomp, .pingresp:
                    break
                }
            }
            if !acknowledgements.isEmpty {
                pending.append(contentsOf: acknowledgements)
                acknowledgements.removeAll(keepingCapacity: true)
            }
            // A handler that waited (an engine behind) is no silence of the broker's: what it sent meanwhile
            // is still to be read.
            lastHeard = MonotonicClock.seconds()
        }
    }

    /// Accepted: the subscription asked for again, and every unacknowledged message sent again (in the
    /// order published, DUP set on those sent before), before anything newer.
    private func connected() -> [UInt8] {
        lock.withLock {
            online = true
            connection += 1
            if firstAnswer == nil {
                firstAnswer = .success(())
                lock.broadcast()
            }
            output.removeAll(keepingCapacity: true)
            var bytes: [UInt8] = []
            if let filter = options.topicFilter {
                // Subscribed again at every connection: a broker that lost its session (no persistence)
                // must still send the topic's messages.
                subscribeID = nil
                let id = freeID() ?? 1
                subscribeID = id
                bytes.append(contentsOf: MQTTPacket.subscribePacket(id: id, filter: filter))
            }
            for (id, message) in inFlight.sorted(by: { $0.value.serial < $1.value.serial }) {
                var packet = message.packet
                if message.sent { packet[0] |= MQTTPacket.duplicate }
                bytes.append(contentsOf: packet)
                inFlight[id]?.sent = true
            }
            bytes.append(contentsOf: admitWaiting())
            return bytes
        }
    }

    /// Under `lock`: messages that waited for room, now in flight; their bytes.
    private func admitWaiting() -> [UInt8] {
        var bytes: [UInt8] = []
        while waitingHead < waiting.count, inFlight.count < Int(options.sendMaximum) {
            let (id, packet) = waiting[waitingHead]
            waitingHead += 1
            waitingIDs.remove(id)
            serial += 1
            inFlight[id] = Outgoing(packet: packet, serial: serial, sent: online)
            if online { bytes.append(contentsOf: packet) }
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead >= 1_024 && waitingHead * 2 >= waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        return bytes
    }

    /// A PUBACK: true if it acknowledges a message of ours still unacknowledged.
    private func acknowledged(_ id: UInt16) -> Bool {
        lock.withLock {
            guard inFlight.removeValue(forKey: id) != nil else { return false }
            if waitingHead < waiting.count { output.append(contentsOf: admitWaiting()) }
            return true
        }
    }

    /// A graceful end: what was queued, then DISCONNECT (the broker then does not publish the will), for
    /// at most a second.
    private func farewell(_ socket: Int32, pending: [UInt8]) {
        var bytes = pending
        lock.withLock {
            bytes.append(contentsOf: output)
            output.removeAll()
            online = false
        }
        bytes.append(contentsOf: [MQTTPacket.disconnect, 0])
        var written = 0
        let deadline = MonotonicClock.seconds() + 1
        while written < bytes.count, MonotonicClock.seconds() < deadline {
            let n = System.retryingEINTR {
                bytes.withUnsafeBytes { Self.send(socket, $0.baseAddress! + written, $0.count - written) }
            }
            if n > 0 {
                written += n
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                _ = try? System.poll(socket, events: Int16(POLLOUT), timeout: 0.1)
            } else {
                return
            }
        }
        shutdown(socket, Int32(SHUT_WR))
    }

    /// `send` without SIGPIPE: a broker gone away is an error to report, not a signal that ends a process
    /// (an embedding application may not ignore SIGPIPE as the `geofence` command does).
    private static func send(_ socket: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        Glibc.send(socket, bytes, count, Int32(MSG_NOSIGNAL))
    }
}

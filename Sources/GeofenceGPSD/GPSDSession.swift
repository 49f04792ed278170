import CGPS
import Foundation
import GeofenceCore
import GeofenceSystem

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    @preconcurrency import Musl
#endif

/// A report from gpsd, decoded from what one `gps_read()` unpacked.
enum GPSDMessage: Equatable {
    case version(CapabilitySnapshot.Daemon)
    case devices([CapabilitySnapshot.Device])
    /// A DEVICE report; `activated` 0 means the device was removed.
    case device(CapabilitySnapshot.Device, removed: Bool)
    case fix(Fix)
    case error(String)
    /// Any other class (WATCH, SKY, GST, …), ignored.
    case other(String)
}

/// One libgps session: owns the `gps_data_t` and the socket inside it.
///
/// Not `Sendable`: one thread opens, reads and closes it.
package final class GPSDSession {
    enum Failure: Error, Equatable {
        case openFailed(String)
        case closedByGPSD
        case readFailed(SystemError)
        case sendFailed
        /// libgps gave up on what the peer sent (a line it cannot parse or one too long for its buffer)
        /// while the connection was still open.
        case garbled
    }

    private let data: UnsafeMutablePointer<gps_data_t>
    /// gps_read() copies the JSON of the message it unpacked here; gpsd lines are < 4 KiB.
    private var message = [CChar](repeating: 0, count: 8192)
    private var isOpen = false
    /// True after a read found only part of a line (see `waitForInput`).
    private var partialLineBuffered = false
    private let fallbackSubject: String

    init(fallbackSubject: String) {
        self.fallbackSubject = fallbackSubject
        data = .allocate(capacity: 1)
        memset(data, 0, MemoryLayout<gps_data_t>.size)
    }

    deinit {
        close()
        data.deallocate()
    }

    func open(host: String, port: UInt16) throws(Failure) {
        close()
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        guard gps_open(host, String(port), data) == 0 else {
            // gps_open leaves its own (negative) code in errno, which gps_errstr explains.
            throw .openFailed(String(cString: gps_errstr(errno)))
        }
        isOpen = true
        partialLineBuffered = false
        try? System.setCloseOnExec(data.pointee.gps_fd)
    }

    /// Asks gpsd to stream JSON reports, of one device or of all.
    func watch(device: String?) throws(Failure) {
        let status: Int32
        if let device {
            status = device.withCString { path in
                gps_stream(
                    data, CGPS_WATCH_ENABLE | CGPS_WATCH_JSON | CGPS_WATCH_DEVICE,
                    UnsafeMutableRawPointer(mutating: path))
            }
        } else {
            status = gps_stream(data, CGPS_WATCH_ENABLE | CGPS_WATCH_JSON, nil)
        }
        guard status == 0 else { throw .sendFailed }
    }

    /// Waits up to `timeout` seconds for a message (or for the connection to close).
    ///
    /// libgps 3.22's `gps_waiting()` answers true at once whenever its buffer holds any bytes,
    /// even an incomplete line, so after a read that found no complete line it would spin;
    /// then the socket itself is polled instead.
    func waitForInput(timeout: Double) throws(Failure) -> Bool {
        guard isOpen else { return false }
        if partialLineBuffered {
            do {
                let events = try System.poll(data.pointee.gps_fd, events: Int16(POLLIN), timeout: timeout)
                return events != 0
            } catch {
                throw .readFailed(error)
            }
        }
        return gps_waiting(data, Int32(max(0, min(timeout, 60)) * 1_000_000))
    }

    /// Reads one message; nil when only part of a line has arrived so far.
    func read(receivedAt: Date) throws(Failure) -> GPSDMessage? {
        errno = 0
        let length = message.withUnsafeMutableBufferPointer { buffer in
            buffer[0] = 0
            return gps_read(data, buffer.baseAddress, Int32(buffer.count))
        }
        if length < 0 {
            let error = errno
            // libgps reports end of stream as -1 with errno 0, and a line it could not read the same way:
            // a peek at the socket tells them apart, so the log says what really happened.
            let stillOpen = error == 0 && peerIsOpen()
            close()
            if stillOpen { throw .garbled }
            if error == 0 { throw .closedByGPSD }
            throw .readFailed(SystemError(call: "recv", errno: error))
        }
        partialLineBuffered = length == 0
        if length == 0 { return nil }
        return decode(receivedAt: receivedAt)
    }

    /// Whether the peer has not closed its end (data waiting, or simply nothing yet).
    private func peerIsOpen() -> Bool {
        var byte: UInt8 = 0
        let n = recv(data.pointee.gps_fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        gps_close(data)
    }

    // MARK: - Decoding

    /// Decodes by the message's JSON class. The `set` bits can't tell what a read contained:
    /// libgps 3.22 leaves bits of earlier reports set (a SKY read still has LATLON_SET and
    /// MODE_SET from the TPV before it; DEVICES and WATCH reads keep VERSION_SET), and every
    /// read has PACKET_SET. The class is the first member of every object gpsd sends.
    private func decode(receivedAt: Date) -> GPSDMessage {
        let messageClass = message.withUnsafeBufferPointer { Self.jsonClass(of: $0) }
        switch messageClass {
        case "TPV":
            return .fix(Self.fix(from: data, receivedAt: receivedAt, fallbackSubject: fallbackSubject))
        case "VERSION":
            let version = CGPS_version(data)!
            return .version(
                CapabilitySnapshot.Daemon(
                    release: String(cString: CGPS_version_release(version)),
                    revision: String(cString: CGPS_version_revision(version)),
                    protocolMajor: Int(version.pointee.proto_major),
                    protocolMinor: Int(version.pointee.proto_minor)
                )
            )
        case "DEVICES":
            let count = CGPS_device_count(data)
            return .devices((0..<count).map { Self.device(from: CGPS_device_at(data, $0)) })
        case "DEVICE":
            let device = CGPS_reporting_device(data)!
            let removed = device.pointee.activated.tv_sec == 0 && device.pointee.activated.tv_nsec == 0
            return .device(Self.device(from: device), removed: removed)
        case "ERROR":
            return .error(String(cString: CGPS_error_message(data)))
        default:
            return .other(messageClass)
        }
    }

    /// The value of the first `"class":"…"` member of a JSON line.
    package static func jsonClass(of line: UnsafeBufferPointer<CChar>) -> String {
        let key = Array(#""class":""#.utf8CString.dropLast())
        let end = line.firstIndex(of: 0) ?? line.count
        guard end >= key.count else { return "" }
        var start = 0
        while start + key.count <= end {
            if line[start..<start + key.count].elementsEqual(key) {
                let valueStart = start + key.count
                var valueEnd = valueStart
                while valueEnd < end, line[valueEnd] != CChar(UInt8(ascii: "\"")) { valueEnd += 1 }
                let bytes = line[valueStart..<valueEnd].map { UInt8(bitPattern: $0) }
                return String(decoding: bytes, as: UTF8.self)
            }
            start += 1
        }
        return ""
    }

    static func fix(
        from data: UnsafePointer<gps_data_t>,
        receivedAt: Date,
        fallbackSubject: String
    ) -> Fix {
        let fix = CGPS_fix(data)!.pointee
        let path = String(cString: CGPS_device_path(CGPS_reporting_device(data)))
        return Fix(
            subject: path.isEmpty ? fallbackSubject : path,
            time: date(fix.time),
            receivedAt: receivedAt,
            mode: FixMode(rawValue: Int(fix.mode)) ?? .unknown,
            latitude: value(fix.latitude),
            longitude: value(fix.longitude),
            altitudeHAE: value(fix.altHAE),
            altitudeMSL: value(fix.altMSL),
            horizontalAccuracy: Fix.horizontalAccuracy(eph: value(fix.eph), epx: value(fix.epx), epy: value(fix.epy)),
            verticalAccuracy: value(fix.epv),
            speed: value(fix.speed),
            course: value(fix.track)
        )
    }

    static func device(from device: UnsafePointer<devconfig_t>) -> CapabilitySnapshot.Device {
        let subtypes = [CGPS_device_subtype(device), CGPS_device_subtype1(device)]
            .map { String(cString: $0!) }
            .filter { !$0.isEmpty }
        let config = device.pointee
        return CapabilitySnapshot.Device(
            path: String(cString: CGPS_device_path(device)),
            driver: nonEmpty(String(cString: CGPS_device_driver(device))),
            subtype: subtypes.isEmpty ? nil : subtypes.joined(separator: " "),
            activated: date(config.activated),
            // libgps leaves -1 (DEVDEFAULT_NATIVE) when the report has no "native".
            nativeMode: config.driver_mode == 0 ? false : config.driver_mode == 1 ? true : nil,
            cycle: seconds(config.cycle),
            minimumCycle: seconds(config.mincycle),
            dataKinds: CapabilitySnapshot.DataKinds(
                rawValue: Int(config.flags & (CGPS_SEEN_GPS | CGPS_SEEN_RTCM2 | CGPS_SEEN_RTCM3 | CGPS_SEEN_AIS)))
        )
    }

    /// gpsd's NaN (absent) becomes nil, never 0.
    private static func value(_ number: Double) -> Double? {
        number.isFinite ? number : nil
    }

    /// libgps leaves a zero timespec when a report has no time.
    private static func date(_ time: timespec) -> Date? {
        guard time.tv_sec != 0 || time.tv_nsec != 0 else { return nil }
        return Date(timeIntervalSince1970: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
    }

    /// A cycle time; libgps leaves 0 when absent, and garbage in DEVICES list entries that
    /// lack one (seen: 9.2e18 s), so anything outside (0, 1 h] is absent.
    private static func seconds(_ time: timespec) -> Double? {
        let value = Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        return value > 0 && value <= 3600 ? value : nil
    }

    private static func nonEmpty(_ text: String) -> String? {
        text.isEmpty ? nil : text
    }
}

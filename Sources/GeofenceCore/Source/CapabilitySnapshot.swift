import Foundation

/// Does the hardware exist, and what can it report? The first question, as a value.
///
/// Captured once per gpsd session (from gpsd's VERSION and DEVICES reports) and re-captured
/// when gpsd reports a device added or removed. It holds no dynamic state: nothing here says
/// whether data is arriving now (that is `SourceLiveness`). What a device *can* report is
/// not announced by gpsd, so it is inferred from what the device has reported so far in the
/// session (`Device.reports`, `Device.observedInterval`); those inferences only ever grow
/// towards the truth, so a snapshot changes a few times at the start of a session and then
/// stays put.
public struct CapabilitySnapshot: Sendable, Hashable {
    /// The gpsd daemon answering (its VERSION report).
    public struct Daemon: Sendable, Hashable {
        /// gpsd's release, such as "3.22".
        public var release: String
        /// gpsd's revision (its VERSION `rev`), free text; empty when gpsd did not say.
        public var revision: String
        /// The JSON protocol version, such as 3.14.
        public var protocolMajor: Int
        /// The JSON protocol's minor version (14 in 3.14).
        public var protocolMinor: Int

        /// A daemon as its VERSION report names it.
        public init(release: String, revision: String, protocolMajor: Int, protocolMinor: Int) {
            self.release = release
            self.revision = revision
            self.protocolMajor = protocolMajor
            self.protocolMinor = protocolMinor
        }
    }

    /// The kinds of data gpsd has seen from a device (gpsd's DEVICE `flags`).
    public struct DataKinds: OptionSet, Sendable, Hashable {
        /// gpsd's `flags` bits, as it sends them.
        public let rawValue: Int
        /// The kinds whose bits are set in gpsd's `flags`.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// GNSS position data (gpsd `SEEN_GPS`).
        public static let gps = DataKinds(rawValue: 0x01)
        /// RTCM version 2 differential corrections (gpsd `SEEN_RTCM2`).
        public static let rtcm2 = DataKinds(rawValue: 0x02)
        /// RTCM version 3 differential corrections (gpsd `SEEN_RTCM3`).
        public static let rtcm3 = DataKinds(rawValue: 0x04)
        /// AIS messages from ships (gpsd `SEEN_AIS`).
        public static let ais = DataKinds(rawValue: 0x08)
    }

    /// The parts of a fix a device has been seen to report.
    public struct ReportedFields: OptionSet, Sendable, Hashable {
        /// The fields as bits, in the order below (time is bit 0).
        public let rawValue: Int
        /// The fields whose bits are set.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// GPS time on its fixes.
        public static let time = ReportedFields(rawValue: 1 << 0)
        /// A 2D (or better) position.
        public static let position2D = ReportedFields(rawValue: 1 << 1)
        /// A 3D fix with altitude.
        public static let position3D = ReportedFields(rawValue: 1 << 2)
        /// Speed over ground.
        public static let speed = ReportedFields(rawValue: 1 << 3)
        /// Course over ground.
        public static let course = ReportedFields(rawValue: 1 << 4)
        /// A horizontal error estimate (`eph`, or `epx` and `epy`).
        public static let horizontalAccuracy = ReportedFields(rawValue: 1 << 5)
        /// A vertical error estimate (`epv`).
        public static let verticalAccuracy = ReportedFields(rawValue: 1 << 6)
    }

    /// One receiver (or other data source) attached to gpsd.
    public struct Device: Sendable, Hashable {
        /// gpsd's name for it: `/dev/ttyACM0`, `udp://127.0.0.1:5000`, …; the `subject` of its fixes.
        public var path: String
        /// The driver gpsd chose (`NMEA0183`, `u-blox`, …); nil until gpsd has identified it.
        public var driver: String?
        /// Hardware/firmware description the receiver gave, if any.
        public var subtype: String?
        /// When gpsd activated the device.
        public var activated: Date?
        /// True when the driver talks the receiver's native binary protocol, false for NMEA mode.
        public var nativeMode: Bool?
        /// gpsd's report cycle for the device, seconds.
        public var cycle: Double?
        /// The shortest cycle the device supports, seconds.
        public var minimumCycle: Double?
        /// The kinds of data gpsd has seen from it; empty until gpsd says.
        public var dataKinds: DataKinds
        /// Inferred: what its fixes have carried in this session.
        public var reports: ReportedFields
        /// Inferred: the shortest interval seen between successive fix times, seconds.
        public var observedInterval: Double?

        /// A device as gpsd's DEVICE report describes it; what is not given is unknown (nil or empty).
        public init(
            path: String,
            driver: String? = nil,
            subtype: String? = nil,
            activated: Date? = nil,
            nativeMode: Bool? = nil,
            cycle: Double? = nil,
            minimumCycle: Double? = nil,
            dataKinds: DataKinds = [],
            reports: ReportedFields = [],
            observedInterval: Double? = nil
        ) {
            self.path = path
            self.driver = driver
            self.subtype = subtype
            self.activated = activated
            self.nativeMode = nativeMode
            self.cycle = cycle
            self.minimumCycle = minimumCycle
            self.dataKinds = dataKinds
            self.reports = reports
            self.observedInterval = observedInterval
        }

        /// How often the device delivers fixes, seconds: gpsd's cycle, else the observed interval.
        public var updateInterval: Double? { cycle ?? observedInterval }
    }

    /// The gpsd daemon, when it has said who it is.
    public var daemon: Daemon?
    /// The devices gpsd has, in gpsd's order; empty means gpsd runs but has no receiver.
    public var devices: [Device]

    /// A snapshot of a daemon and its devices; the default is an empty one (nothing known yet).
    public init(daemon: Daemon? = nil, devices: [Device] = []) {
        self.daemon = daemon
        self.devices = devices
    }

    /// The device gpsd calls `path`, or nil when the snapshot has none by that name.
    public func device(at path: String) -> Device? {
        devices.first { $0.path == path }
    }

    /// gpsd reported a device (added, or re-identified): updates its entry or appends it,
    /// keeping what has been inferred about it. Returns true when the snapshot changed.
    @discardableResult
    public mutating func update(_ device: Device) -> Bool {
        guard let index = devices.firstIndex(where: { $0.path == device.path }) else {
            devices.append(device)
            return true
        }
        var merged = device
        merged.reports.formUnion(devices[index].reports)
        merged.observedInterval = Self.shorter(devices[index].observedInterval, device.observedInterval)
        guard merged != devices[index] else { return false }
        devices[index] = merged
        return true
    }

    /// gpsd reported a device removed. Returns true when the snapshot changed.
    @discardableResult
    public mutating func removeDevice(at path: String) -> Bool {
        let before = devices.count
        devices.removeAll { $0.path == path }
        return devices.count != before
    }

    /// Notes what `fix` shows its device can report; `previousFixTime` is the time of the
    /// device's previous fix, for the update interval. Returns true when the snapshot changed.
    /// Fixes from devices not in the snapshot are ignored.
    @discardableResult
    public mutating func learn(from fix: Fix, previousFixTime: Date?) -> Bool {
        guard let index = devices.firstIndex(where: { $0.path == fix.subject }) else { return false }
        var device = devices[index]
        device.reports.formUnion(Self.fields(of: fix))
        if let time = fix.time, let previousFixTime {
            // Whole milliseconds, so floating-point noise in fix times never reads as a new,
            // shorter interval; only forward steps, and not a gap of minutes: the goal is the rate.
            let interval = (time.timeIntervalSince(previousFixTime) * 1000).rounded() / 1000
            if interval >= 0.001, interval <= 60 {
                device.observedInterval = Self.shorter(device.observedInterval, interval)
            }
        }
        guard device != devices[index] else { return false }
        devices[index] = device
        return true
    }

    /// The fields a single fix carries.
    public static func fields(of fix: Fix) -> ReportedFields {
        var fields: ReportedFields = []
        if fix.time != nil { fields.insert(.time) }
        if fix.mode >= .twoD, fix.latitude != nil, fix.longitude != nil { fields.insert(.position2D) }
        if fix.mode == .threeD, fix.altitudeHAE != nil || fix.altitudeMSL != nil { fields.insert(.position3D) }
        if fix.speed != nil { fields.insert(.speed) }
        if fix.course != nil { fields.insert(.course) }
        if fix.horizontalAccuracy != nil { fields.insert(.horizontalAccuracy) }
        if fix.verticalAccuracy != nil { fields.insert(.verticalAccuracy) }
        return fields
    }

    private static func shorter(_ a: Double?, _ b: Double?) -> Double? {
        switch (a, b) {
        case (let a?, let b?): return min(a, b)
        case (let a?, nil): return a
        case (nil, let b): return b
        }
    }
}

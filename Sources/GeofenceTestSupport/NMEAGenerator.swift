import Foundation
import GeofenceCore

/// Writes valid NMEA 0183 sentences (with checksums) for synthetic receivers in tests:
/// `$GPRMC`, `$GPGGA`, `$GPGSA` and optionally `$GPGST` per epoch, or the no-fix sentences
/// of a receiver without a sky view.
///
/// gpsd 3.22 moves NMEA dates before 2017 forward by 1024 weeks (the GPS week-rollover
/// workaround), so epochs must be dated 2017 or later; `track` refuses earlier dates.
package struct NMEAGenerator: Sendable {
    /// One second (or other interval) of a receiver's output.
    package struct Epoch: Sendable, Equatable {
        package var time: Date
        package var latitude: Double
        package var longitude: Double
        /// Metres above mean sea level.
        package var altitude: Double
        /// Height of the geoid above the ellipsoid, metres (so HAE = altitude + geoidSeparation).
        package var geoidSeparation: Double
        /// Metres per second.
        package var speed: Double
        /// Degrees from true north.
        package var course: Double
        package var satellites: Int
        package var hdop: Double
        /// One-sigma latitude and longitude errors for `$GPGST`, metres.
        package var latitudeError: Double
        package var longitudeError: Double

        package init(
            time: Date,
            latitude: Double,
            longitude: Double,
            altitude: Double = 50,
            geoidSeparation: Double = 47,
            speed: Double = 0,
            course: Double = 0,
            satellites: Int = 8,
            hdop: Double = 0.9,
            latitudeError: Double = 2.5,
            longitudeError: Double = 2.0
        ) {
            self.time = time
            self.latitude = latitude
            self.longitude = longitude
            self.altitude = altitude
            self.geoidSeparation = geoidSeparation
            self.speed = speed
            self.course = course
            self.satellites = satellites
            self.hdop = hdop
            self.latitudeError = latitudeError
            self.longitudeError = longitudeError
        }
    }

    /// gpsd 3.22 shifts earlier NMEA dates by 1024 weeks.
    package static let earliestSafeDate = Date(timeIntervalSince1970: 1_483_228_800)  // 2017-01-01T00:00:00Z

    /// The talker id: "GP" (GPS), "GN" (multi-constellation), …
    package var talker: String
    /// Whether `sentences(for:)` adds a `$GPGST` error-estimate sentence.
    package var includeGST: Bool

    package init(talker: String = "GP", includeGST: Bool = false) {
        self.talker = talker
        self.includeGST = includeGST
    }

    // MARK: - Epochs

    /// The sentences of one epoch with a 3D fix: RMC, GGA, GSA (and GST if enabled).
    package func sentences(for epoch: Epoch) -> [String] {
        var sentences = [rmc(epoch), gga(epoch), gsa(epoch)]
        if includeGST { sentences.append(gst(epoch)) }
        return sentences
    }

    /// The sentences of one epoch without a fix, as a receiver with no sky view sends them;
    /// with `time` nil even the clock is unknown.
    package func noFixSentences(at time: Date?) -> [String] {
        let clock = time.map(Self.timeField) ?? ""
        let date = time.map(Self.dateField) ?? ""
        return [
            Self.sentence("\(talker)RMC,\(clock),V,,,,,,,\(date),,,N"),
            Self.sentence("\(talker)GGA,\(clock),,,,,0,00,99.99,,,,,,"),
            Self.sentence("\(talker)GSA,A,1,,,,,,,,,,,,,99.99,99.99,99.99"),
        ]
    }

    package func rmc(_ epoch: Epoch) -> String {
        let knots = epoch.speed / 0.514_444
        return Self.sentence(
            "\(talker)RMC,\(Self.timeField(epoch.time)),A,\(Self.latitudeFields(epoch.latitude)),"
                + "\(Self.longitudeFields(epoch.longitude)),\(Self.fixed(knots, 3)),\(Self.fixed(epoch.course, 2)),"
                + "\(Self.dateField(epoch.time)),,,A"
        )
    }

    package func gga(_ epoch: Epoch) -> String {
        Self.sentence(
            "\(talker)GGA,\(Self.timeField(epoch.time)),\(Self.latitudeFields(epoch.latitude)),"
                + "\(Self.longitudeFields(epoch.longitude)),1,\(Self.twoDigits(epoch.satellites)),"
                + "\(Self.fixed(epoch.hdop, 2)),\(Self.fixed(epoch.altitude, 2)),M,"
                + "\(Self.fixed(epoch.geoidSeparation, 2)),M,,"
        )
    }

    package func gsa(_ epoch: Epoch) -> String {
        let used = (0..<12).map { $0 < epoch.satellites ? Self.twoDigits($0 * 2 + 2) : "" }
        let pdop = epoch.hdop * 1.6
        let vdop = epoch.hdop * 1.3
        return Self.sentence(
            "\(talker)GSA,A,3,\(used.joined(separator: ",")),\(Self.fixed(pdop, 2)),"
                + "\(Self.fixed(epoch.hdop, 2)),\(Self.fixed(vdop, 2))"
        )
    }

    package func gst(_ epoch: Epoch) -> String {
        let rms = (epoch.latitudeError * epoch.latitudeError + epoch.longitudeError * epoch.longitudeError).squareRoot()
        return Self.sentence(
            "\(talker)GST,\(Self.timeField(epoch.time)),\(Self.fixed(rms, 1)),\(Self.fixed(rms, 1)),"
                + "\(Self.fixed(min(epoch.latitudeError, epoch.longitudeError), 1)),0.0,"
                + "\(Self.fixed(epoch.latitudeError, 1)),\(Self.fixed(epoch.longitudeError, 1)),"
                + "\(Self.fixed(epoch.latitudeError * 1.5, 1))"
        )
    }

    /// A straight track at constant speed and course: `count` epochs `interval` seconds apart.
    /// (A local flat-earth step: fine for the few kilometres a test drives.)
    package static func track(
        from start: Coordinate,
        at startTime: Date,
        course: Double,
        speed: Double,
        interval: Double = 1,
        count: Int
    ) -> [Epoch] {
        precondition(startTime >= earliestSafeDate, "gpsd 3.22 shifts NMEA dates before 2017 by 1024 weeks")
        let metresPerDegreeLatitude = 111_320.0
        let radians = course * .pi / 180
        return (0..<count).map { index in
            let distance = speed * interval * Double(index)
            let north = distance * cos(radians)
            let east = distance * sin(radians)
            let latitude = start.latitude + north / metresPerDegreeLatitude
            let longitude =
                start.longitude + east / (metresPerDegreeLatitude * cos(start.latitude * .pi / 180))
            return Epoch(
                time: startTime.addingTimeInterval(interval * Double(index)),
                latitude: latitude,
                longitude: longitude,
                speed: speed,
                course: course
            )
        }
    }

    // MARK: - Framing

    /// The XOR of the bytes between `$` and `*`.
    package static func checksum<Body: StringProtocol>(of body: Body) -> UInt8 {
        body.utf8.reduce(0) { $0 ^ $1 }
    }

    /// `$BODY*HH`, without line ending.
    package static func sentence(_ body: String) -> String {
        "$\(body)*\(hex(checksum(of: body)))"
    }

    /// True when `sentence` is `$BODY*HH` and HH is the checksum of BODY (case-insensitive).
    package static func hasValidChecksum(_ sentence: String) -> Bool {
        let line = sentence.trimmingCharacters(in: .newlines)
        guard line.hasPrefix("$"), let star = line.lastIndex(of: "*") else { return false }
        let body = line[line.index(after: line.startIndex)..<star]
        let given = line[line.index(after: star)...]
        guard given.count == 2, let value = UInt8(given, radix: 16) else { return false }
        return value == checksum(of: body)
    }

    // MARK: - Fields

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// hhmmss.ss
    package static func timeField(_ time: Date) -> String {
        let parts = utc.dateComponents([.hour, .minute, .second], from: time)
        let whole = floor(time.timeIntervalSince1970)
        let hundredths = Int(((time.timeIntervalSince1970 - whole) * 100).rounded())
        return twoDigits(parts.hour!) + twoDigits(parts.minute!) + twoDigits(parts.second!) + "."
            + twoDigits(min(hundredths, 99))
    }

    /// ddmmyy
    package static func dateField(_ time: Date) -> String {
        let parts = utc.dateComponents([.day, .month, .year], from: time)
        return twoDigits(parts.day!) + twoDigits(parts.month!) + twoDigits(parts.year! % 100)
    }

    /// ddmm.mmmmmm,N
    package static func latitudeFields(_ latitude: Double) -> String {
        let (degrees, minutes) = degreesAndMinutes(abs(latitude))
        return twoDigits(degrees) + minutesField(minutes) + (latitude < 0 ? ",S" : ",N")
    }

    /// dddmm.mmmmmm,E
    package static func longitudeFields(_ longitude: Double) -> String {
        let (degrees, minutes) = degreesAndMinutes(abs(longitude))
        let degreesText = degrees < 100 ? "0" + twoDigits(degrees) : String(degrees)
        return degreesText + minutesField(minutes) + (longitude < 0 ? ",W" : ",E")
    }

    private static func degreesAndMinutes(_ value: Double) -> (Int, Double) {
        // Round to the printed precision first so 59.9999999 minutes never prints as "60".
        let microMinutes = (value * 60 * 1_000_000).rounded()
        let degrees = Int(microMinutes / 60_000_000)
        let minutes = (microMinutes - Double(degrees) * 60_000_000) / 1_000_000
        return (degrees, minutes)
    }

    private static func minutesField(_ minutes: Double) -> String {
        let text = fixed(minutes, 6)
        return minutes < 10 ? "0" + text : text
    }

    package static func fixed(_ value: Double, _ decimals: Int) -> String {
        String(format: "%.\(decimals)f", value)
    }

    private static func twoDigits(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}

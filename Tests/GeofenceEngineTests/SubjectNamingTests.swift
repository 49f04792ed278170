import Foundation
import GeofenceCore
import GeofenceEngine
import Testing

/// `run --subject`: the receiver's fixes renamed, and one warning when a second device shows up.
@Suite("subject naming")
struct SubjectNamingTests {
    static func fix(_ device: String) -> Fix {
        Fix(subject: device, time: Date(), mode: .threeD, latitude: 51.5, longitude: -0.12)
    }

    @Test func everyFixIsTheNamesAndASecondDeviceIsSaidOnce() {
        var naming = SubjectNaming(name: "truck-7")
        var out = naming.rename(.fix(Self.fix("/dev/ttyACM0")))
        out += naming.rename(.fixes([Self.fix("/dev/ttyACM0"), Self.fix("/dev/ttyUSB1")]))
        out += naming.rename(.fixes([Self.fix("/dev/ttyUSB1"), Self.fix("/dev/ttyUSB2")]))
        out += naming.rename(.up)
        var subjects: [String] = []
        var warnings: [String] = []
        for report in out {
            switch report {
            case .fix(let f): subjects.append(f.subject)
            case .fixes(let fs): subjects += fs.map(\.subject)
            case .warning(let w): warnings.append(w)
            default: break
            }
        }
        #expect(subjects == Array(repeating: "truck-7", count: 5))
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("/dev/ttyACM0 and /dev/ttyUSB1") == true, "\(warnings)")
    }
}

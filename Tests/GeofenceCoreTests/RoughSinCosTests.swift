import Foundation
import Testing

@testable import GeofenceCore

@Suite("A course's sine and cosine")
struct RoughSinCosTests {
    @Test("within 2e-9 of libm's over every course, both signs, and exact at the quarter turns")
    func roughSinCos() {
        var worst = 0.0
        for step in -3_600_000...3_600_000 where step % 7 == 0 || step % 90_000 == 0 {
            let degrees = Double(step) / 10_000
            let (s, c) = Degrees.roughSinCos(degrees)
            let radians = degrees * .pi / 180
            worst = max(worst, abs(s - sin(radians)), abs(c - cos(radians)))
        }
        #expect(worst < 2e-9, "worst \(worst)")
        for (degrees, s, c) in [(0.0, 0.0, 1.0), (90, 1, 0), (180, 0, -1), (270, -1, 0), (-90, -1, 0)] {
            let got = Degrees.roughSinCos(degrees)
            #expect(got.sin == s && got.cos == c, "\(degrees)°: \(got)")
        }
        // Beyond ±360° (no course is): the exact reduction's result.
        #expect(Degrees.roughSinCos(725) == Degrees.sinCos(725))
    }
}

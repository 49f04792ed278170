/// Decimal numbers as JSON text of random shape, for tests of number readers against the standard library's:
/// an optional minus, 1 to 22 digits, a point anywhere or none, no exponent (the caller adds one if it wants).
package enum RandomDecimal {
    /// With `leadingZeros` false, a number of more than one digit before its point never starts with 0 (JSON's
    /// grammar); with it true, it may (what a reader must refuse or leave to the strict parser).
    package static func text(using random: inout SeededGenerator, leadingZeros: Bool) -> String {
        var text = Bool.random(using: &random) ? "-" : ""
        let digits = Int.random(in: 1...22, using: &random)
        let point = Int.random(in: 0...digits, using: &random)
        for index in 0..<digits {
            if index == point, index > 0 { text += "." }
            let digit =
                !leadingZeros && index == 0 && digits > 1 && point != 1
                ? Int.random(in: 1...9, using: &random) : Int.random(in: 0...9, using: &random)
            text += String(digit)
        }
        return text
    }
}

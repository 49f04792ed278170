/// Shared by every harness: each is compiled together with this file into its own executable.

/// Stops the run with `message` when an invariant does not hold: the trap makes libFuzzer save the
/// input as a crash artifact, exactly as a crash inside the code under test would.
func require(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() { fatalError(message(), file: file, line: line) }
}

/// Whether `a` and `b` differ by at most `absolute` plus a few units in the last place of the larger,
/// for results that are documented to be exact only to a stated precision.
func nearlyEqual(_ a: Double, _ b: Double, within absolute: Double) -> Bool {
    (a - b).magnitude <= absolute + 4 * max(a.magnitude, b.magnitude).ulp
}

/// The input as a buffer. libFuzzer hands over a heap copy of exactly `size` bytes, so reading past
/// the end of this buffer is caught by AddressSanitizer.
func fuzzInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: size > 0 ? data : nil, count: size)
}

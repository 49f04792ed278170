import Foundation
import GeofenceCLI
import Testing

@Suite("CLI reference")
struct CLIReferenceTests {
    @Test("Docs/cli.md is the built-in help, up to date")
    func upToDate() throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let path = repo.appendingPathComponent("Docs/cli.md").path
        let expected = CLIReference.markdown()
        if ProcessInfo.processInfo.environment["GEOFENCE_UPDATE_DOCS"] == "1" {
            try expected.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let actual = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            actual == expected,
            "Docs/cli.md is out of date: run GEOFENCE_UPDATE_DOCS=1 swift test --filter CLIReference")
    }
}

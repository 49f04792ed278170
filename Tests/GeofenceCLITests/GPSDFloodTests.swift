import Foundation
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A peer on the gpsd port that sends TPVs as fast as the engine reads them.
@Suite("a flooding gpsd", .serialized)
struct GPSDFloodTests {
    /// The engine's resident memory, from /proc, in MiB.
    static func residentMiB(_ pid: Int32) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kB = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        return kB / 1024
    }

    @Test(
        "memory stays bounded under a flood, from one device or a new device a line, and SIGTERM stops it in time",
        arguments: [HostileGPSD.Flood.oneDevice, .newDevicePerLine])
    func flood(_ kind: HostileGPSD.Flood) async throws {
        let peer = try HostileGPSD(port: 0, flood: kind)
        defer { peer.stop() }
        try await withCLI { cli in
            #expect(
                try cli.run("add", "--id", "here", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(peer.port)"])
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 15), "\(daemon.log)")
            let seconds = SoakScale.pick(short: 10.0, long: 60.0)
            // Warm-up: the first second fills the engine's buffers, its store's cache and the allocator's arenas.
            // A measurement: a warm-up, then samples for a fixed time; no condition to wait for.
            try await Task.sleep(for: .seconds(2))
            let sentAtStart = peer.messageCount
            let start = try #require(Self.residentMiB(daemon.pid))
            var samples: [Double] = []
            let began = Date()
            while Date().timeIntervalSince(began) < seconds {
                // Samples twice a second: a measurement, not a wait.
                try await Task.sleep(for: .milliseconds(500))
                if let rss = Self.residentMiB(daemon.pid) { samples.append(rss) }
            }
            let sent = peer.messageCount - sentAtStart
            let peak = samples.max() ?? start
            // It read the flood, and what it read is what it judged: no buffer grows behind the engine.
            #expect(sent > 1000, "the peer sent \(sent) lines")
            #expect(daemon.isRunning, "\(daemon.log)")
            #expect(peak - start < 8, "RSS \(start) MiB after warm-up, \(peak) MiB at the peak: \(samples)")

            let stopped = await daemon.stop(timeout: 10)
            #expect(stopped != nil)
            #expect((stopped ?? 99) < 2, "the stop took \(stopped ?? -1) s; Docs/daemon.md promises 2")
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
            #expect(!daemon.log.contains("did not stop in time"), "\(daemon.log)")
            if kind == .newDevicePerLine {
                #expect(daemon.log.contains("devices at once"), "\(daemon.log)")
            }
            print(
                "gpsd flood (\(kind)): \(sent) lines in \(Int(seconds)) s ("
                    + String(format: "%.0f/s", Double(sent) / seconds) + "); RSS "
                    + String(
                        format: "%.1f MiB after warm-up, %.1f MiB peak, %.1f MiB at the end", start, peak,
                        samples.last ?? 0
                    )
                    + "; SIGTERM stopped it in " + String(format: "%.2f s", stopped ?? -1))
        }
    }
}

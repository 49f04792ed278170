import Foundation
import GeofenceCore
import Synchronization

/// A source that reports what it is given: for tests of the engine's logic, and for embedders whose fixes come
/// from somewhere of their own (a simulator, another library). It records being started and stopped, so a test
/// can check that whoever started it also stopped it.
public final class ScriptedSource: LocationSource {
    /// For logs and `status` (`scripted source` by default).
    public let label: String
    /// The script, then whatever `send` hands over, in that order of arrival.
    public let reports: LocationReports
    private let script: [LocationReport]
    private let endsWithScript: Bool
    private let record = Mutex<(starts: Int, stops: Int)>((0, 0))

    /// - Parameters:
    ///   - script: reports handed over when the source starts.
    ///   - endsWithScript: whether the reports end after the script (a recording), or wait for `send` and
    ///     `finish` (a live source).
    public init(
        label: String = "scripted source", script: [LocationReport] = [], endsWithScript: Bool = false,
        backPressure: LocationReports.BackPressure = .unbounded
    ) {
        self.label = label
        self.script = script
        self.endsWithScript = endsWithScript
        reports = LocationReports(backPressure: backPressure)
    }

    /// Fixes as a script: one `.fix` report each, after `.up`.
    public convenience init(label: String = "scripted source", fixes: [Fix], endsWithScript: Bool = false) {
        self.init(label: label, script: [.up] + fixes.map { .fix($0) }, endsWithScript: endsWithScript)
    }

    /// Hands the script over (after anything already sent) and, with `endsWithScript`, ends the reports;
    /// counted in `starts`.
    public func start() {
        record.withLock { $0.starts += 1 }
        for report in script { reports.sendNow(report) }
        if endsWithScript { reports.finish() }
    }

    /// Ends the reports (what was handed over is still taken); counted in `stops`.
    public func stop() async {
        record.withLock { $0.stops += 1 }
        reports.finish()
    }

    /// Hands more reports over, without waiting; false once the source was stopped or finished.
    @discardableResult
    public func send(_ more: LocationReport...) -> Bool {
        more.allSatisfy { reports.sendNow($0) }
    }

    /// Ends the reports, as a recording's end does.
    public func finish() { reports.finish() }

    /// How often the source was started and stopped.
    public var starts: Int { record.withLock { $0.starts } }
    /// How often `stop()` was called.
    public var stops: Int { record.withLock { $0.stops } }
}

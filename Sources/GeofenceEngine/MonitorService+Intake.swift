import Foundation
import GeofenceCore

/// Whether the monitor commits fixes as they come or queues them because the store refuses writes (a full
/// disk), and how far the source's fixes are committed (for a source that acknowledges after commit).
struct CommitGate: Sendable {
    /// The last commit of fixes failed: fixes are judged and queued without a commit each, and the commit is
    /// tried again every `StoreTrouble.retryInterval` (and at every tick), after making room.
    var blocked = false
    var retryAt = Date.distantPast
    /// Told the number of the source's fixes (counted from 1 in the order handed over) up to which all are
    /// committed or need no commit, whenever it moves (`FixPipeline.committedThrough`): an MQTT source
    /// acknowledging after commit sends the broker its acknowledgements then. Nil: no one asks.
    let commitMark: (@Sendable (Int64) -> Void)?
    var reportedMark: Int64 = 0

    init(commitMark: (@Sendable (Int64) -> Void)?) { self.commitMark = commitMark }

    /// While the store refuses writes, the source is held back once this many accepted fixes wait for a
    /// commit: memory stays bounded, and a producer that can wait (a FIFO, a broker) keeps the rest.
    static let holdSourceAfter = 50_000

    /// A commit failed at `time`: queue from now on, and try again a little later.
    mutating func refused(at time: Date) {
        blocked = true
        retryAt = time.addingTimeInterval(StoreTrouble.retryInterval)
    }
}

/// Fix intake: the source's reports, one at a time, from `FixIntakeService`.
extension MonitorService {
    package func handle(_ report: LocationReport) {
        switch report {
        case .fix(let fix):
            handle(fixes: [fix])
            reportMark()
        case .fixes(let fixes):
            handle(fixes: fixes)
            reportMark()
        case .up, .down, .capabilities, .liveness, .warning:
            carryOut(health.report(report))
        }
    }

    private func handle(fixes: [Fix]) {
        guard servicesOn else {
            // Not consumed, and nothing to commit: the source may let them go.
            pipeline.skip(fixes.count)
            return
        }
        health.fixesArrived(fixes)
        // The batch judged, then committed at once (events included): a transaction a batch the source read
        // at once, not one an event. A commit that fails (a full disk) leaves the outputs pending in the
        // pipeline. While the store refuses, fixes are queued without a commit (a failing commit rewrites the
        // whole queue: at every batch, that is quadratic), and the commit is tried again every half second.
        if commits.blocked {
            for fix in fixes { pipeline.judgeWithoutCommit(fix) }
        } else {
            do {
                journal.committed(try pipeline.processForEvents(batch: fixes))
            } catch {
                commitRefused(error)
            }
        }
        if commits.blocked && now() >= commits.retryAt { retryStore() }
        // A source that acknowledges after commit waits for this batch's commit (its broker sends no more
        // than its in-flight window meanwhile): committed now, not with the next batch of bookkeeping.
        if commits.commitMark != nil, !commits.blocked, pipeline.holdsMark {
            do {
                journal.committed(try pipeline.flush())
            } catch {
                commitRefused(error)
            }
        }
    }

    private func commitRefused(_ error: any Error) {
        commits.refused(at: now())
        journal.failed(error)
    }

    /// Whether the source must wait: the store refuses writes and `holdSourceAfter` fixes wait for it.
    var holdsSource: Bool { commits.blocked && pipeline.uncommittedCount >= CommitGate.holdSourceAfter }

    /// Tries the queued commit again (room was made when it last failed for want of space).
    func retryStore() {
        commits.retryAt = now().addingTimeInterval(StoreTrouble.retryInterval)
        do {
            journal.committed(try pipeline.flush())
            commits.blocked = false
        } catch {
            journal.failed(error)
        }
        reportMark()
    }

    /// Frequent work: pass on reports that waited for the rest of their epoch.
    package func settle() {
        // While the store refuses, a commit here, ten times a second, would rewrite the whole queue each time.
        guard !commits.blocked else {
            pipeline.settleWithoutCommit()
            return
        }
        defer { reportMark() }
        do {
            journal.committed(try pipeline.settle().events)
            // Reports released from the epoch assembler hold the source's acknowledgements until committed.
            if commits.commitMark != nil, pipeline.holdsMark { journal.committed(try pipeline.flush()) }
        } catch {
            commitRefused(error)
        }
    }

    /// Tells `commitMark` how far the source's fixes are committed, when that moved.
    func reportMark() {
        guard let commitMark = commits.commitMark else { return }
        let mark = pipeline.committedThrough
        guard mark > commits.reportedMark else { return }
        commits.reportedMark = mark
        commitMark(mark)
    }
}

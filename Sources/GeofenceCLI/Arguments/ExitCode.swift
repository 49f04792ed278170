/// The process exit status of a command, following BSD `sysexits.h` so scripts can tell a
/// typo (64) from bad data (65), a missing daemon (69) or a refused permission (77).
package enum ExitCode: Int32, Sendable, CaseIterable {
    case ok = 0
    case failure = 1
    /// `locate`: the best fix at the deadline did not meet the target accuracy.
    case coarse = 2
    /// `locate`: no usable fix at all before the deadline.
    case silent = 3
    /// Wrong command-line usage: unknown option, missing argument, invalid value.
    case usage = 64
    /// Input data was incorrect (an import file, a region definition).
    case dataError = 65
    /// An input file did not exist or was not readable.
    case noInput = 66
    /// A service (the daemon, gpsd) is unavailable.
    case unavailable = 69
    /// An internal error: a bug.
    case software = 70
    /// An output file could not be created.
    case cantCreate = 73
    /// An error while doing I/O on a file or socket.
    case ioError = 74
    /// A temporary failure; retrying may succeed.
    case tempFail = 75
    /// The caller is not allowed to do this.
    case noPermission = 77
    /// Something was found in an unconfigured or misconfigured state.
    case config = 78

    /// `status`: the engine runs but one of the four answers is a problem (or Location Services are off),
    /// as `systemctl is-active` says 3 for a unit that is not active. The same status as `locate`'s
    /// `silent`: a command that runs but cannot give what a script waits for.
    package static let notReady = ExitCode.silent
}

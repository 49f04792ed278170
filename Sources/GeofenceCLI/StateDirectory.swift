import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where the state lives when `--state-dir` and `GEOFENCE_STATE_DIR` are not given: `/var/lib/geofence`
/// as root, else `$XDG_STATE_HOME/geofence`, else `~/.local/state/geofence`.
package enum StateDirectory {
    package static func `default`(environment: [String: String]) -> String {
        if getuid() == 0 { return "/var/lib/geofence" }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/geofence" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/geofence"
    }

    package static let helpDefault = "/var/lib/geofence as root, else $XDG_STATE_HOME/geofence"
}

import Foundation
import Geofence

/// gpsd, through libgps: by default the gpsd on this machine (localhost:2947) and every device it has; here
/// one elsewhere and one of its devices. It reconnects by itself, backing off as `backoff` says.
func gpsdSource() -> GPSDLocationSource {
    let address = GPSDAddress(host: "192.0.2.10", port: 2947, device: "/dev/ttyACM0")
    return GPSDLocationSource(configuration: GPSDConfiguration(address: address), subject: "truck-7")
}

/// gpsd-style TPV JSON lines from a file, a FIFO or "-" (standard input); a line without a `device` is
/// `defaultSubject`'s. The sequence ends at the end of a file.
func jsonLinesSource() -> JSONLineSource {
    JSONLineSource(path: "/var/lib/my-app/drive.jsonl", defaultSubject: "truck-7")
}

/// An MQTT subscription (QoS 1, a persistent session named by `clientID`), each message a TPV or an OwnTracks
/// location. Connect it before the session: a broker that is unreachable or refuses says so here, at once.
func mqttSource() throws -> MQTTSource {
    var address = MQTTAddress(host: "broker.example.net", port: 8883, topicFilter: "fleet/+/tpv")
    address.tls = true
    address.caFile = "/etc/ssl/certs/ca-certificates.crt"
    address.username = "geofence"
    address.password = "secret"
    // The same, as `geofence run --source` takes it:
    // try MQTTAddress(parsing: "mqtts://geofence:secret@broker.example.net:8883/fleet/+/tpv")
    let source = MQTTSource(address: address, clientID: "my-app-geofence", naming: .level(2))
    try source.connect(timeout: 10)
    return source
}

/// Reports the program hands over itself: fixes from elsewhere, or a test's script.
func scriptedSource() -> ScriptedSource {
    let source = ScriptedSource()
    let fix = Fix(
        subject: "truck-7", time: Date(), mode: .threeD, latitude: 51.5007, longitude: -0.12027,
        horizontalAccuracy: 5)
    source.send(.up, .fix(fix))
    return source  // `source.finish()` ends its reports, and the session
}

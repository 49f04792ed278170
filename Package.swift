// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "geofence",
    products: [
        // geofence as a library (Docs/library.md): `import Geofence`.
        .library(name: "Geofence", targets: ["Geofence"]),
        .executable(name: "geofence", targets: ["geofence"]),
        .executable(name: "geofence-sim", targets: ["GeofenceSim"]),
        .executable(name: "geofence-bench", targets: ["GeofenceBench"]),
    ],
    targets: [
        // Pure model and decisions: no I/O, no clocks, no C.
        .target(name: "GeofenceCore"),

        // The system calls (EINTR retried, errno read at once, errors typed) and the monotonic clock, written once.
        .target(name: "GeofenceSystem"),

        // SQLite through Debian's libsqlite3-dev.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(name: "GeofenceStore", dependencies: ["GeofenceCore", "GeofenceSystem", "CSQLite"]),

        // gpsd through Debian's libgps-dev (gpsd 3.22, API 11).
        .systemLibrary(
            name: "CGPS",
            pkgConfig: "libgps",
            providers: [.apt(["libgps-dev"])]
        ),
        .target(name: "GeofenceGPSD", dependencies: ["GeofenceCore", "GeofenceSystem", "CGPS"]),

        // MQTT through Debian's libmosquitto-dev (Mosquitto 2).
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // NATS with JetStream and its key-value store through Debian's libnats-dev (nats.c 3.4): the cluster's
        // transport (Docs/cluster.md).
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // An HTTP server for /metrics and /healthz (Debian's libmicrohttpd-dev).
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),

        // HTTP for the webhook sink (Docs/http.md) through Debian's libcurl4-openssl-dev, and its HMAC-SHA256
        // signature through OpenSSL's libcrypto (Debian's libssl-dev, which libcurl4-openssl-dev depends on).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),

        // systemd's notification socket (sd_notify: READY, STATUS, STOPPING, WATCHDOG) through Debian's
        // libsystemd-dev.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),

        // The daemon and the pipeline that replay shares with it.
        .target(
            name: "GeofenceEngine",
            dependencies: [
                "GeofenceCore", "GeofenceSystem", "GeofenceStore", "GeofenceGPSD", "CMosquitto", "CSystemd",
                "CMicroHTTPD", "CNATS", "CCurl", "CCrypto",
            ]),

        // The library's façade: the small public API an embedder sees, and nothing else.
        .target(name: "Geofence", dependencies: ["GeofenceCore", "GeofenceEngine", "GeofenceGPSD"]),
        // A program that embeds the library, for the crash tests (kill -9, then resume from an event id).
        .executableTarget(name: "GeofenceEmbedProbe", dependencies: ["Geofence"]),

        // The command-line tool: a library (so tests can drive it in-process) and a thin executable.
        .target(
            name: "GeofenceCLI",
            dependencies: ["GeofenceCore", "GeofenceSystem", "GeofenceStore", "GeofenceEngine", "GeofenceGPSD"]),
        .executableTarget(name: "geofence", dependencies: ["GeofenceCLI"]),

        // Scenario builders and the real-gpsd harness, for tests only.
        .target(name: "GeofenceTestSupport", dependencies: ["GeofenceCore"]),

        // The cluster's test harness (issue 26): a fleet published into NATS, the events stream read back.
        // For tests and the bench only.
        .target(
            name: "GeofenceClusterSupport", dependencies: ["GeofenceCore", "GeofenceEngine", "GeofenceTestSupport"]),

        // The demo's receiver: writes a recorded drive, plays NMEA into gpsd's UDP feed.
        .executableTarget(name: "GeofenceSim", dependencies: ["GeofenceCore", "GeofenceTestSupport"]),

        // Benchmarks: `swift run -c release geofence-bench` (Docs/benchmarks.md).
        .executableTarget(
            name: "GeofenceBench",
            dependencies: [
                "GeofenceCore", "GeofenceSystem", "GeofenceStore", "GeofenceEngine", "GeofenceTestSupport",
                "GeofenceClusterSupport",
            ]),

        .testTarget(
            name: "GeofenceCoreTests", dependencies: ["GeofenceCore", "GeofenceTestSupport"],
            resources: [.copy("Resources")]),
        .testTarget(name: "GeofenceSystemTests", dependencies: ["GeofenceSystem"]),
        .testTarget(
            name: "GeofenceGPSDTests", dependencies: ["GeofenceGPSD", "GeofenceCore", "GeofenceTestSupport"]),
        .testTarget(
            name: "GeofenceStoreTests", dependencies: ["GeofenceStore", "GeofenceCore", "GeofenceTestSupport"]),
        .testTarget(
            name: "GeofenceEngineTests",
            dependencies: [
                "GeofenceEngine", "GeofenceStore", "GeofenceCore", "GeofenceTestSupport", "GeofenceClusterSupport",
            ]),
        // The library as an embedder sees it: `import Geofence` and test support only.
        .testTarget(
            name: "GeofenceTests",
            dependencies: [
                "Geofence", "GeofenceCore", "GeofenceEngine", "GeofenceStore", "GeofenceTestSupport",
                "GeofenceEmbedProbe",
            ]),
        // End-to-end: runs the built `geofence` binary (hence the dependency on the executable).
        .testTarget(
            name: "GeofenceCLITests",
            dependencies: [
                "GeofenceCLI", "GeofenceEngine", "GeofenceStore", "GeofenceCore", "GeofenceTestSupport",
                "GeofenceClusterSupport", "geofence",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version: 6.0
// An application that embeds geofence: `swift run --package-path Examples/print-events print-events DRIVE`,
// and the code of Docs/library.md, compiled.
import PackageDescription

let package = Package(
    name: "print-events",
    dependencies: [.package(name: "geofence", path: "../..")],
    targets: [
        .executableTarget(
            name: "print-events",
            dependencies: [.product(name: "Geofence", package: "geofence")]),
        // Docs/library.md's code, each file one of its blocks (Scripts/example-check.sh checks they are the
        // same): compiled, never run.
        .target(
            name: "library-docs",
            dependencies: [.product(name: "Geofence", package: "geofence")]),
    ],
    swiftLanguageModes: [.v6]
)

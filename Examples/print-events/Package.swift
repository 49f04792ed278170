// swift-tools-version: 6.0
// An application that embeds geofence: `swift run --package-path Examples/print-events print-events DRIVE`.
import PackageDescription

let package = Package(
    name: "print-events",
    dependencies: [.package(name: "geofence", path: "../..")],
    targets: [
        .executableTarget(
            name: "print-events",
            dependencies: [.product(name: "Geofence", package: "geofence")])
    ],
    swiftLanguageModes: [.v6]
)

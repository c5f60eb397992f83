// swift-tools-version:6.1
import Foundation
import PackageDescription

// Lockbox's examples, as a package of their own that depends on the Lockbox package in the folder
// above by path, as an app would by URL: so the root manifest carries none of their dependencies
// (Hummingbird, FlyingFox), and a package that depends on `Lockbox` resolves none of them.
//
// The root is depended on with the traits the test command builds it with (`PostgreSQL`,
// `SwiftConfiguration`, `YAML`; scripts/traits.sh), so that this package, built in the root's
// scratch folder (`swift build --package-path Examples --scratch-path .build`, scripts/ci/run-examples.sh),
// reuses the SwiftNIO that the root's build compiled for LockboxPostgres, and Lockbox's own modules,
// instead of compiling them again. They are listed in the order scripts/traits.sh names them, which
// gives both builds the same compiler flags.
// An example is one target here (and one line in scripts/ci/run-examples.sh if it runs headless).

/// The root package's identity: the name of its folder (a path dependency is named after it).
let lockbox = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "LockboxExamples",
    dependencies: [
        .package(path: "..", traits: ["YAML", "SwiftConfiguration", "PostgreSQL"]),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // With its YAML trait, as the root enables it here (its `YAML` trait).
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        // DeviceLogin: a small real HTTP server on loopback.
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.0"),
        // HummingbirdService: it shares SwiftNIO with postgres-nio.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // HummingbirdPostgres: ServiceGroup and Logger, both already resolved through Hummingbird.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // A service keeping its tokens in a key-file vault.
        .executableTarget(
            name: "TokenKeeper",
            dependencies: [
                .product(name: "Lockbox", package: lockbox),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "TokenKeeper"
        ),
        // Real apps' credential flows, each runnable headless (see README.md).
        .target(
            name: "ExampleSupport",
            dependencies: [
                .product(name: "Lockbox", package: lockbox),
                .product(name: "LockboxSecretService", package: lockbox),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "ExampleSupport"
        ),
        .executableTarget(
            name: "FamilyProfiles",
            dependencies: [.product(name: "Lockbox", package: lockbox), "ExampleSupport"],
            path: "FamilyProfiles"
        ),
        .executableTarget(
            name: "ParentMode",
            dependencies: [.product(name: "Lockbox", package: lockbox), "ExampleSupport"],
            path: "ParentMode"
        ),
        .executableTarget(
            name: "SessionRestore",
            dependencies: [.product(name: "Lockbox", package: lockbox), "ExampleSupport"],
            path: "SessionRestore"
        ),
        .executableTarget(
            name: "DriverUnlock",
            dependencies: [.product(name: "Lockbox", package: lockbox), "ExampleSupport"],
            path: "DriverUnlock"
        ),
        .executableTarget(
            name: "DeviceLogin",
            dependencies: [
                .product(name: "Lockbox", package: lockbox), "ExampleSupport",
                .product(name: "FlyingFox", package: "FlyingFox"),
                .product(name: "FlyingSocks", package: "FlyingFox"),
            ],
            path: "DeviceLogin"
        ),
        // A Hummingbird 2 service over the async API (HummingbirdService/README.md), built and
        // driven by scripts/ci/run-service-example.sh.
        .executableTarget(
            name: "HummingbirdService",
            dependencies: [
                .product(name: "Lockbox", package: lockbox),
                .product(name: "LockboxSwiftConfiguration", package: lockbox),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            path: "HummingbirdService",
            exclude: ["README.md"]
        ),
        // A Hummingbird 2 service on a vault in PostgreSQL, with the store's connection pool as a
        // service of its ServiceGroup; driven by scripts/ci/run-postgres-service-example.sh.
        .executableTarget(
            name: "HummingbirdPostgres",
            dependencies: [
                .product(name: "Lockbox", package: lockbox),
                .product(name: "LockboxPostgres", package: lockbox),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "HummingbirdPostgres"
        ),
    ],
    swiftLanguageModes: [.v6]
)

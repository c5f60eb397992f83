// swift-tools-version:6.0
// An example Hummingbird 2 service over Lockbox, as its own package: Hummingbird and SwiftNIO stay
// out of the root package's graph, so the root's builds (and its sanitizer builds) never compile
// them. scripts/run-service-example.sh builds and drives it; see README.md beside this file.
import PackageDescription

let package = Package(
    name: "HummingbirdService",
    platforms: [.macOS(.v14)],
    dependencies: [
        // Named, so the dependency does not depend on what the checkout's folder is called.
        .package(name: "Lockbox", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
    ],
    targets: [
        .executableTarget(
            name: "HummingbirdService",
            dependencies: [
                .product(name: "Lockbox", package: "Lockbox"),
                .product(name: "LockboxSwiftConfiguration", package: "Lockbox"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        // The tests of the root package's LockboxSwiftConfiguration product live here, where
        // swift-configuration is built anyway (Hummingbird depends on it), so the root's suite
        // and its two sanitizer builds never compile swift-configuration for them.
        .testTarget(
            name: "LockboxSwiftConfigurationTests",
            dependencies: [
                .product(name: "Lockbox", package: "Lockbox"),
                .product(name: "LockboxSwiftConfiguration", package: "Lockbox"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

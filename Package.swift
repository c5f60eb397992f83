// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Lockbox",
    products: [
        .library(name: "Lockbox", targets: ["Lockbox"]),
        // TPM 2.0 key slots and TPM-enforced PINs; links tpm2-tss. Apps that do not want a TPM
        // depend on "Lockbox" alone and link nothing of it.
        .library(name: "LockboxTPM", targets: ["LockboxTPM"]),
        .executable(name: "lockbox", targets: ["lockbox"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        // Only the DeviceLogin example uses it: a small real HTTP server on loopback.
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.0"),
    ],
    targets: [
        // libsodium, found through pkg-config; `apt-get install libsodium-dev` provides it.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // libsecret (the freedesktop Secret Service client), found through pkg-config;
        // `apt-get install libsecret-1-dev` provides it.
        .systemLibrary(
            name: "CLibSecret",
            pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev"])]
        ),
        // libkeyutils (the kernel keyring), found through pkg-config; `apt-get install libkeyutils-dev`.
        .systemLibrary(
            name: "CKeyutils",
            pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]
        ),
        // tpm2-tss (ESAPI, the TCTI loader, response-code decoding, marshalling), found through
        // pkg-config; `apt-get install libtss2-dev` provides it. Only LockboxTPM uses it.
        .systemLibrary(
            name: "CTSS2",
            pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]
        ),
        // Linux headers Glibc's module lacks (prctl); no library to link.
        .systemLibrary(name: "CLinux"),
        .target(
            name: "Lockbox",
            dependencies: [
                "CSodium",
                "CLibSecret",
                "CKeyutils",
                "CLinux",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "LockboxTPM",
            dependencies: ["Lockbox", "CTSS2"]
        ),
        .executableTarget(
            name: "lockbox",
            dependencies: [
                "Lockbox",
                "LockboxTPM",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(
            name: "LockboxBenchmarks",
            dependencies: ["Lockbox"],
            path: "Benchmarks/LockboxBenchmarks"
        ),
        .executableTarget(
            name: "TokenKeeper",
            dependencies: ["Lockbox"],
            path: "Examples/TokenKeeper"
        ),
        // Real apps' credential flows, each runnable headless (see Examples/README.md).
        .target(
            name: "ExampleSupport",
            dependencies: ["Lockbox", .product(name: "SystemPackage", package: "swift-system")],
            path: "Examples/ExampleSupport"
        ),
        .executableTarget(name: "FamilyProfiles", dependencies: ["Lockbox", "ExampleSupport"], path: "Examples/FamilyProfiles"),
        .executableTarget(name: "ParentMode", dependencies: ["Lockbox", "ExampleSupport"], path: "Examples/ParentMode"),
        .executableTarget(name: "SessionRestore", dependencies: ["Lockbox", "ExampleSupport"], path: "Examples/SessionRestore"),
        .executableTarget(name: "DriverUnlock", dependencies: ["Lockbox", "ExampleSupport"], path: "Examples/DriverUnlock"),
        .executableTarget(
            name: "DeviceLogin",
            dependencies: [
                "Lockbox", "ExampleSupport",
                .product(name: "FlyingFox", package: "FlyingFox"),
                .product(name: "FlyingSocks", package: "FlyingFox"),
            ],
            path: "Examples/DeviceLogin"
        ),
        // Test helper: a process that keeps a Secret Service connection while its provider stops.
        .executableTarget(
            name: "KeyringProbe",
            dependencies: ["Lockbox"],
            path: "Tests/KeyringProbe"
        ),
        .testTarget(
            name: "LockboxTests",
            dependencies: [
                "Lockbox",
                "LockboxTPM",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

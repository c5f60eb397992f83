// swift-tools-version:6.1
import PackageDescription

// PostgreSQL support and the swift-configuration adapter are package traits, off by default, so a
// package that depends on `Lockbox` (or any product but these two) resolves neither postgres-nio and
// SwiftNIO nor swift-configuration: SwiftPM leaves out a dependency whose every use is guarded by a
// disabled trait. A service that wants them names the trait in its dependency line (README,
// "Install"); this repository's test command builds with all of them (scripts/traits.sh).
// The examples (Hummingbird, FlyingFox and the app flows) are a package of their own, Examples/.
let package = Package(
    name: "Lockbox",
    products: [
        // The core: Vault, the encrypted file store, PINs, credentials. Links libsodium only.
        .library(name: "Lockbox", targets: ["Lockbox"]),
        // The freedesktop Secret Service store (gnome-keyring, KeePassXC): Lockbox's own D-Bus client,
        // its encrypted session through libcrypto (libsecret only as the fallback session).
        .library(name: "LockboxSecretService", targets: ["LockboxSecretService"]),
        // Re-authentication windows in the Linux kernel keyring (libkeyutils).
        .library(name: "LockboxSessionWindows", targets: ["LockboxSessionWindows"]),
        // The former name of LockboxSessionWindows (deprecated): the same module, re-exported.
        .library(name: "LockboxWindows", targets: ["LockboxWindows"]),
        // Known-answer tests and their vectors (what `lockbox selftest` runs).
        .library(name: "LockboxSelfTest", targets: ["LockboxSelfTest"]),
        // TPM 2.0 key slots and TPM-enforced PINs; links tpm2-tss. Apps that do not want a TPM
        // depend on "Lockbox" alone and link nothing of it.
        .library(name: "LockboxTPM", targets: ["LockboxTPM"]),
        // LockboxConfiguration from swift-configuration's ConfigReader (LOCKBOX_* environment
        // variables, JSON files; YAML files where the app enables swift-configuration's `YAML`
        // trait). Empty unless the `SwiftConfiguration` trait is enabled: apps that configure
        // Lockbox by hand resolve none of it.
        .library(name: "LockboxSwiftConfiguration", targets: ["LockboxSwiftConfiguration"]),
        // For users' tests: a fault-injecting store (plus MemoryStore), cheap PIN presets. Like
        // swift-log's InMemoryLogging, apart from the library so no service ships it.
        .library(name: "LockboxTesting", targets: ["LockboxTesting"]),
        // The command-line tool: Sources/LockboxMain runs the commands of the LockboxCLI module.
        .executable(name: "lockbox", targets: ["LockboxMain"]),
        // `lockbox` for the PostgreSQL store: the same commands with `--store postgres` (which
        // `lockbox` hands to it, so `lockbox` itself links no SwiftNIO). Built without the
        // `PostgreSQL` trait it only says so (exit 27, as when it is missing).
        .executable(name: "lockbox-postgres", targets: ["LockboxPostgresCLI"]),
        // The fleet store: one vault in PostgreSQL for many hosts, over postgres-nio. Empty unless
        // the `PostgreSQL` trait is enabled: only apps that enable it resolve and build SwiftNIO.
        .library(name: "LockboxPostgres", targets: ["LockboxPostgres"]),
    ],
    traits: [
        .trait(
            name: "PostgreSQL",
            description: "The PostgreSQL store (LockboxPostgres, lockbox-postgres) over postgres-nio and SwiftNIO."
        ),
        .trait(
            name: "SwiftConfiguration",
            description: "LockboxConfiguration from swift-configuration's ConfigReader (LockboxSwiftConfiguration)."
        ),
        // The adapter's YAML test (and YAML files for an app that would rather not name
        // swift-configuration's trait itself): enables swift-configuration's `YAML` trait, and so Yams.
        .trait(
            name: "YAML",
            description: "SwiftConfiguration, with swift-configuration's YAML trait (jpsim/Yams) enabled.",
            enabledTraits: ["SwiftConfiguration"]
        ),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        // Logging and metrics APIs for services (the backends are the service's choice).
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Only LockboxSwiftConfiguration and its tests use it (trait `SwiftConfiguration`), with
        // swift-configuration's default traits; its `YAML` trait only with ours (an app that wants
        // YAML files enables either in its own manifest).
        .package(
            url: "https://github.com/apple/swift-configuration", from: "1.4.0",
            traits: [.defaults, .trait(name: "YAML", condition: .when(traits: ["YAML"]))]
        ),
        // Only LockboxPostgres and its tests, tools and CLI use it (trait `PostgreSQL`).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        // LockboxPostgres's `PostgresStoreService` is a `Service` (trait `PostgreSQL`; postgres-nio
        // depends on it already, so it adds nothing to resolve or build).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        // `swift package generate-documentation --target Lockbox` (the DocC catalog,
        // Sources/Lockbox/Lockbox.docc; scripts/ci/check-docc.sh). A command plugin: nothing of it is
        // linked or built by `swift build`.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // libsodium, found through pkg-config; `apt-get install libsodium-dev` provides it.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // libsecret (the freedesktop Secret Service client) and the GLib calls around it, for the
        // fallback session only (a provider that refuses Lockbox's), loaded at run time with dlopen
        // (libsecret-1.so.0, `apt-get install libsecret-1-0`): our own prototypes, so no GLib
        // pkg-config flags (-pthread) and nothing loaded until a program needs that session. See
        // docs/ARCHITECTURE.md.
        .target(name: "CLibsecretFallback"),
        // The Secret Service session's Diffie-Hellman, HKDF and AES-128-CBC, done by OpenSSL's
        // libcrypto: its headers (`apt-get install libssl-dev`) for the prototypes, the library
        // (libcrypto.so.3, Debian's libssl3) loaded with dlopen on the first encrypted session, so
        // nothing else maps it. See Sources/CLibcrypto/include/CLibcrypto.h.
        .target(name: "CLibcrypto"),
        // libkeyutils (the kernel keyring), found through pkg-config; `apt-get install libkeyutils-dev`.
        .systemLibrary(
            name: "CKeyutils",
            pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]
        ),
        // tpm2-tss (ESAPI, the TCTI loader, response-code decoding, marshalling): its headers
        // (`apt-get install libtss2-dev`) for the types and prototypes, its libraries loaded at run
        // time with dlopen on the first TPM call (libtss2-esys.so.0 etc., the libtss2-* packages),
        // so lockbox maps no tpm2-tss or libcrypto unless a TPM is used. Only LockboxTPM uses it.
        // See Sources/CTSS2/include/CTSS2.h.
        .target(name: "CTSS2"),
        // Linux headers Glibc's module lacks (prctl); no library to link.
        .systemLibrary(name: "CLinux"),
        // Debian's SQLite, for vault format 2 (docs/ARCHITECTURE.md, "SQLite access").
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "Lockbox",
            dependencies: [
                "CSodium",
                "CLinux",
                "CSQLite",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "LockboxTesting",
            dependencies: ["Lockbox"]
        ),
        .target(
            name: "LockboxSecretService",
            dependencies: ["Lockbox", "CLibsecretFallback", "CLibcrypto", "CSodium"]
        ),
        .target(
            name: "LockboxSessionWindows",
            dependencies: ["Lockbox", "CKeyutils", .product(name: "SystemPackage", package: "swift-system")]
        ),
        // The former name of LockboxSessionWindows, kept so that a package depending on the
        // product "LockboxWindows" and importing LockboxWindows still builds; deprecated.
        .target(
            name: "LockboxWindows",
            dependencies: ["LockboxSessionWindows"]
        ),
        .target(
            name: "LockboxSelfTest",
            // LockboxSecretService and CLibcrypto: the Secret Service session, whose HKDF, AES-CBC
            // and MODP vectors run through the code the client uses.
            dependencies: ["Lockbox", "LockboxSecretService", "CLibcrypto", .product(name: "SystemPackage", package: "swift-system")],
            exclude: ["Vectors"],
            resources: [
                // Compiled into the module as byte arrays (PackageResources), so `lockbox selftest`
                // needs no resource bundle beside the binary.
                .embedInCode("Vectors/argon2id-libsodium.json"),
                .embedInCode("Vectors/argon2id-phc-winner-argon2.json"),
                .embedInCode("Vectors/blake2b-rfc7693-and-kat.json"),
                .embedInCode("Vectors/aes128cbc-sp800-38a-and-wycheproof.json"),
                .embedInCode("Vectors/hkdf-sha256-rfc5869-and-wycheproof.json"),
                .embedInCode("Vectors/modp1024-rfc2409.json"),
                .embedInCode("Vectors/lockbox-vault-v1.json"),
                .embedInCode("Vectors/lockbox-vault-v2.json"),
                .embedInCode("Vectors/xchacha20poly1305-draft-irtf-cfrg-xchacha-03.json"),
            ]
        ),
        // The parsers' fuzzing entry points: `package` access, in no product, so no service links
        // them. The harness executable (LockboxFuzzer) is built with -sanitize=fuzzer by
        // scripts/ci/fuzz.sh only.
        .target(
            name: "LockboxFuzzing",
            dependencies: ["Lockbox", "LockboxSessionWindows", "LockboxSelfTest", "LockboxSecretService",
                           .product(name: "SystemPackage", package: "swift-system")]
        ),
        .executableTarget(
            name: "LockboxFuzzer",
            dependencies: ["LockboxFuzzing"]
        ),
        .target(
            name: "LockboxTPM",
            dependencies: ["Lockbox", "CTSS2"]
        ),
        .target(
            name: "LockboxSwiftConfiguration",
            dependencies: [
                "Lockbox",
                .product(name: "Configuration", package: "swift-configuration", condition: .when(traits: ["SwiftConfiguration"])),
            ]
        ),
        // The commands of the `lockbox` tool, as a module that its two executables run: `lockbox`
        // (LockboxMain) and `lockbox-postgres` (LockboxPostgresCLI, which adds the PostgreSQL store).
        .target(
            name: "LockboxCLI",
            dependencies: [
                "Lockbox",
                "LockboxSecretService",
                "LockboxSessionWindows",
                "LockboxSelfTest",
                "LockboxTPM",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(name: "LockboxMain", dependencies: ["LockboxCLI"]),
        .executableTarget(
            name: "LockboxBenchmarks",
            dependencies: [
                "Lockbox", "LockboxSecretService", "CLibsecretFallback",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/LockboxBenchmarks"
        ),
        // Test helper: a process that keeps a Secret Service connection while its provider stops.
        .executableTarget(
            name: "KeyringProbe",
            dependencies: ["Lockbox", "LockboxSecretService"],
            path: "Tests/KeyringProbe"
        ),
        // What the test targets share: temporary folders, running the `lockbox` binary and other
        // processes, the CLI fixture, PIN clocks and fixtures, the store contracts, the keyring
        // environment, a software TPM. A plain target in no product, so no service links it.
        .target(
            name: "LockboxTestSupport",
            dependencies: [
                "Lockbox",
                "LockboxTesting",
                "LockboxTPM",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Tests/LockboxTestSupport"
        ),
        // One test target per module. Those whose tests run the `lockbox` binary depend on
        // LockboxMain, so that building the test product alone (scripts/ci/sanitizers.sh) builds it.
        .testTarget(
            name: "LockboxTests",
            dependencies: [
                "Lockbox",
                "LockboxTesting",
                "LockboxTestSupport",
                // The parsers' fuzzing entry points and the vector builder, for the fuzzers' findings.
                "LockboxFuzzing",
                "LockboxSelfTest",
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "SystemPackage", package: "swift-system"),
                "LockboxMain",
            ]
        ),
        .testTarget(
            name: "LockboxSecretServiceTests",
            dependencies: [
                "Lockbox",
                "LockboxSecretService",
                "LockboxSessionWindows",
                "CLibcrypto",
                "LockboxTestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
                "LockboxMain",
                // Started by a Secret Service test.
                "KeyringProbe",
            ]
        ),
        .testTarget(
            name: "LockboxSessionWindowsTests",
            dependencies: [
                "Lockbox",
                "LockboxSessionWindows",
                "LockboxSecretService",
                "LockboxTesting",
                "LockboxTestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
                "LockboxMain",
            ]
        ),
        .testTarget(
            name: "LockboxTPMTests",
            dependencies: [
                "Lockbox",
                "LockboxTPM",
                "LockboxTestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(
            name: "LockboxSelfTestTests",
            dependencies: [
                "Lockbox",
                "LockboxSelfTest",
                "LockboxTestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
                "LockboxMain",
            ]
        ),
        // The `lockbox` tool: tests that run the binary, its help and generated docs, its error
        // table and exit codes, its integrations (git, exec).
        .testTarget(
            name: "LockboxCLITests",
            dependencies: [
                "LockboxCLI",
                "LockboxMain",
                "Lockbox",
                "LockboxTPM",
                "LockboxTesting",
                "LockboxTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The PostgreSQL store and everything built on it: each source is inside `#if PostgreSQL`,
        // and each use of postgres-nio is conditioned on the trait, so without it these targets
        // are empty and postgres-nio is neither resolved nor built (the sanitizer builds, the
        // quick loop, every app that does not enable the trait).
        .target(
            name: "LockboxPostgres",
            dependencies: [
                "Lockbox",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(
            name: "LockboxPostgresCLI",
            dependencies: ["LockboxCLI", "Lockbox", "LockboxPostgres", .product(name: "SystemPackage", package: "swift-system")]
        ),
        // Run against a real PostgreSQL primary and synchronous standby by scripts/test.sh
        // (inside scripts/dev/postgres-session.sh); they fail instead of skipping when
        // LOCKBOX_REQUIRE_POSTGRES_TESTS=1 and no cluster is given, or the trait is off.
        // Test helper: one "host" of the cross-host tests (PIN guesses, a hash that never ends).
        .executableTarget(
            name: "LockboxPostgresWorker",
            dependencies: [
                "Lockbox", "LockboxPostgres",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Tests/LockboxPostgresWorker"
        ),
        .testTarget(
            name: "LockboxPostgresTests",
            dependencies: [
                "Lockbox", "LockboxPostgres", "LockboxTesting", "LockboxTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                // The service test: PostgresStoreService in a ServiceGroup, its logs and metrics captured.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                // The failover test's writer processes; a dependency so `swift build --build-tests` builds it.
                "LockboxPostgresLoad",
                // Started by the cross-host tests; a dependency so building the tests builds it.
                "LockboxPostgresWorker",
                // The command-line tests run both: `lockbox --store postgres` hands over to `lockbox-postgres`.
                "LockboxMain", "LockboxPostgresCLI",
            ]
        ),
        // Load for the PostgreSQL store in separate processes: the failover test's writers and
        // scripts/bench/bench-postgres.sh's benchmark (Sources/LockboxPostgresLoad/main.swift).
        .executableTarget(
            name: "LockboxPostgresLoad",
            dependencies: [
                "Lockbox", "LockboxPostgres", "LockboxTesting", "LockboxTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The LockboxSwiftConfiguration adapter's tests (trait `SwiftConfiguration`; without it they
        // are one test that fails when LOCKBOX_REQUIRE_CONFIGURATION_TESTS=1).
        .testTarget(
            name: "LockboxSwiftConfigurationTests",
            dependencies: [
                "Lockbox",
                "LockboxSwiftConfiguration",
                .product(name: "Configuration", package: "swift-configuration", condition: .when(traits: ["SwiftConfiguration"])),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

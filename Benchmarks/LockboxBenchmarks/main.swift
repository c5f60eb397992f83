// LockboxBenchmarks: a plain release-mode benchmark of the Lockbox library and the `lockbox` CLI.
//
//     swift build -c release --scratch-path .build-bench
//     .build-bench/release/LockboxBenchmarks            # full run, about a minute and a half
//     .build-bench/release/LockboxBenchmarks --quick    # smoke run, seconds (CI)
//     scripts/dev/keyring-session.sh -- .build-bench/release/LockboxBenchmarks --only secret-service
//
// The `secret-service` group needs an unlocked, throwaway Secret Service: it runs only when
// LOCKBOX_TEST_KEYRING=unlocked (which scripts/dev/keyring-session.sh sets), and is skipped with a
// note otherwise, because it stores 1,000 items in the keyring (100 with --quick). It adds about
// a minute and a half: gnome-keyring rewrites its whole file on every write, so filling and
// emptying the keyring alone take about 35 s and 18 s.
//
// Results go to standard output as Markdown; progress goes to standard error. Every vault lives
// in a fresh temporary folder that is deleted at the end, whatever happens.
//
// No external benchmark package: each operation is timed on its own with CLOCK_MONOTONIC after a
// warm-up, and the report gives the median, p90 and p99 (nearest rank) and ops/s (from the mean).

import ArgumentParser
import CLibsecretFallback
import Foundation
import Lockbox
import LockboxSecretService
import SystemPackage

// MARK: - Options

/// The benchmark's options, parsed by swift-argument-parser like lockbox's own. The
/// secret-service group runs only inside a throwaway keyring session
/// (scripts/dev/keyring-session.sh -- LockboxBenchmarks ...), which sets LOCKBOX_TEST_KEYRING=unlocked;
/// elsewhere it is skipped with a note.
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "LockboxBenchmarks",
        abstract: "Time Lockbox's stores, unlocking and the lockbox process; write the results for docs/PERFORMANCE.md.")

    static let groups: Set<String> = ["get", "set", "unlock", "process", "secret-service", "concurrency", "format2"]

    @Flag(help: "A short smoke run (few iterations, vaults of up to 1,000 items).")
    var quick = false

    /// Where the temporary benchmark folder is made (default: the system temporary folder).
    @Option(
        name: .customLong("dir"),
        help: ArgumentHelp(
            "Make the temporary benchmark folder under this path (default: $TMPDIR or /tmp); it must be on the file system whose fsync you want to measure.",
            valueName: "path"))
    var parentDirectory: String?

    /// The `lockbox` binary; default: next to this executable.
    @Option(
        name: .customLong("lockbox"),
        help: ArgumentHelp(
            "The lockbox binary for the process benchmark (default: `lockbox` next to this executable).", valueName: "path"))
    var lockboxPath: String?

    @Option(
        name: .customLong("only"),
        help: ArgumentHelp(
            "Run only these groups, comma-separated: get, set, unlock, process, secret-service, concurrency, format2 (handy under a profiler). The secret-service group needs scripts/dev/keyring-session.sh.",
            valueName: "list"))
    var onlyList: String?

    @Option(
        name: .customLong("format2-sizes"),
        help: ArgumentHelp(
            "Item counts for the format2 group, comma-separated (default: the plan's sizes; e.g. 10,10000,1000000).",
            valueName: "list"))
    var formatTwoSizesList: String?

    @Option(
        name: .customLong("writer-sets"),
        help: ArgumentHelp(
            "Sets per writer process in the format2 group's 8-writer row (default 1,000; 25 with --quick).", valueName: "count"))
    var writerSets: Int?

    /// The item counts of the format2 group.
    var formatTwoSizes: [Int]? {
        formatTwoSizesList.map { $0.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }
    }

    /// Which benchmark groups to run (default: all).
    var only: Set<String> {
        onlyList.map { Set($0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) } ?? Options.groups
    }

    func validate() throws {
        if let list = formatTwoSizesList {
            guard let sizes = formatTwoSizes, sizes.count == list.split(separator: ",").count,
                sizes.allSatisfy({ (1...10_000_000).contains($0) })
            else {
                throw ValidationError("--format2-sizes takes item counts from 1 to 10,000,000, comma-separated")
            }
        }
        if let writerSets, !(1...100_000).contains(writerSets) {
            throw ValidationError("--writer-sets takes 1 to 100,000")
        }
        guard !only.isEmpty, only.isSubset(of: Options.groups) else {
            throw ValidationError("--only takes a comma-separated list of: \(Options.groups.sorted().joined(separator: ", "))")
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// How many times to run each kind of benchmark.
struct Plan {
    var sizes: [Int]
    var processSizes: [Int]
    var getIterations: Int, getWarmup: Int
    var setIterations: Int, setWarmup: Int
    var keyFileUnlockIterations: Int, keyFileUnlockWarmup: Int
    var interactiveIterations: Int, moderateIterations: Int, kdfWarmup: Int
    var processIterations: Int, processWarmup: Int
    /// Secret Service: items filled into the keyring, in-process get/set runs, process runs (each tool).
    var keyringItems: Int
    var keyringGetIterations: Int, keyringGetWarmup: Int
    var keyringSetIterations: Int, keyringSetWarmup: Int
    var keyringProcessIterations: Int, keyringProcessWarmup: Int
    /// Rounds of 100 concurrent token reads and of 100 writes, per API (blocking, async).
    var concurrencyRounds: Int = 1

    static let full = Plan(
        sizes: [10, 1_000, 10_000], processSizes: [10, 1_000, 10_000],
        getIterations: 200_000, getWarmup: 20_000,
        setIterations: 200, setWarmup: 10,
        keyFileUnlockIterations: 200, keyFileUnlockWarmup: 10,
        interactiveIterations: 10, moderateIterations: 5, kdfWarmup: 1,
        processIterations: 200, processWarmup: 10,
        keyringItems: 1_000,
        keyringGetIterations: 2_000, keyringGetWarmup: 200,
        keyringSetIterations: 200, keyringSetWarmup: 10,
        keyringProcessIterations: 200, keyringProcessWarmup: 10,
        concurrencyRounds: 10)

    static let quick = Plan(
        sizes: [10, 1_000], processSizes: [10, 1_000],
        getIterations: 2_000, getWarmup: 200,
        setIterations: 10, setWarmup: 2,
        keyFileUnlockIterations: 10, keyFileUnlockWarmup: 2,
        interactiveIterations: 2, moderateIterations: 1, kdfWarmup: 0,
        processIterations: 10, processWarmup: 2,
        keyringItems: 100,
        keyringGetIterations: 50, keyringGetWarmup: 10,
        keyringSetIterations: 10, keyringSetWarmup: 2,
        keyringProcessIterations: 10, keyringProcessWarmup: 2)
}

// MARK: - Timing and statistics

/// Nanoseconds on the monotonic clock.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
}

/// Runs `body` `warmup` times untimed, then `iterations` times timed one by one.
func measure(warmup: Int, iterations: Int, _ body: (Int) throws -> Void) rethrows -> Stats {
    for index in 0..<warmup { try body(index) }
    var samples = [UInt64]()
    samples.reserveCapacity(iterations)
    for index in 0..<iterations {
        let start = monotonicNanoseconds()
        try body(warmup + index)
        samples.append(monotonicNanoseconds() &- start)
    }
    return Stats(samples)
}

struct Stats {
    let sorted: [UInt64]
    let mean: Double

    init(_ samples: [UInt64]) {
        sorted = samples.sorted()
        mean = samples.isEmpty ? 0 : Double(samples.reduce(0, +)) / Double(samples.count)
    }

    var count: Int { sorted.count }

    /// The nearest-rank percentile, in nanoseconds.
    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return Double(sorted[min(max(rank, 1), sorted.count) - 1])
    }

    var median: Double { percentile(50) }
    var opsPerSecond: Double { mean > 0 ? 1e9 / mean : 0 }
}

func formatDuration(_ nanoseconds: Double) -> String {
    switch nanoseconds {
    case ..<1_000: return String(format: "%.0f ns", nanoseconds)
    case ..<10_000: return String(format: "%.2f µs", nanoseconds / 1e3)
    case ..<1_000_000: return String(format: "%.1f µs", nanoseconds / 1e3)
    case ..<10_000_000: return String(format: "%.2f ms", nanoseconds / 1e6)
    case ..<1_000_000_000: return String(format: "%.1f ms", nanoseconds / 1e6)
    default: return String(format: "%.2f s", nanoseconds / 1e9)
    }
}

func formatCount(_ value: Int) -> String {
    let digits = String(value)
    var out = ""
    for (offset, character) in digits.enumerated() {
        if offset > 0 && (digits.count - offset) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return out
}

func formatRate(_ value: Double) -> String {
    value >= 100 ? formatCount(Int(value.rounded())) : String(format: "%.1f", value)
}

func progress(_ line: String) {
    FileHandle.standardError.write(Data("[bench] \(line)\n".utf8))
}

// MARK: - Deterministic randomness

/// SplitMix64: reproducible item choices, so runs are comparable.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A 40-character token, like an API access token.
func makeToken(_ generator: inout SplitMix64) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    return String((0..<40).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
}

/// The address of item `index`: 100 accounts per service.
func itemAddress(_ index: Int) -> (service: String, account: String) {
    ("com.example.service-\(index / 100)", "account-\(index)")
}

// MARK: - Fixtures

/// The temporary folder, its key file, and one populated vault per size.
final class Fixtures {
    let root: URL
    /// Where populated vaults are built: /dev/shm when available (fsync there is nearly free, so
    /// building 10,000 items one `set` at a time takes seconds, not minutes), else `root`.
    let staging: URL
    let keyFile: FilePath
    /// The environment of measured `lockbox` children: ours, except that the CLI records its
    /// store choice in a settings file inside `root` (never in the user's ~/.config), and no
    /// LOCKBOX_* variable picks a store, profile, vault or key behind the arguments' back.
    let childEnvironment: [String: String]
    private(set) var tokens: [Int: [String]] = [:]
    private var counter = 0

    init(parent: String?) throws {
        let base =
            parent.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory
        let unique = "lockbox-bench-\(getpid())-\(UUID().uuidString.prefix(8))"
        root = base.appendingPathComponent(unique, isDirectory: true)
        try FileManager.default.createDirectory(
            at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let shm = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: shm.path, isDirectory: &isDirectory), isDirectory.boolValue,
            FileManager.default.isWritableFile(atPath: shm.path)
        {
            staging = shm.appendingPathComponent(unique, isDirectory: true)
        } else {
            staging = root.appendingPathComponent("staging", isDirectory: true)
        }
        keyFile = FilePath(root.appendingPathComponent("vault.key").path)
        var environment = ProcessInfo.processInfo.environment
        for name in ["LOCKBOX_BACKEND", "LOCKBOX_PROFILE", "LOCKBOX_VAULT", "LOCKBOX_KEY_FILE"] {
            environment[name] = nil
        }
        environment["XDG_CONFIG_HOME"] = root.appendingPathComponent("config", isDirectory: true).path
        childEnvironment = environment
        do {
            try FileManager.default.createDirectory(
                at: staging, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try KeyFile.generate(at: keyFile)
        } catch {
            cleanUp()
            throw error
        }
    }

    func cleanUp() { Self.remove([staging, root]) }

    static func remove(_ folders: [URL]) {
        for folder in folders where FileManager.default.fileExists(atPath: folder.path) {
            do {
                try FileManager.default.removeItem(at: folder)
            } catch {
                progress("warning: could not remove \(folder.path): \(error)")
            }
        }
    }

    /// Removes the folders and exits if the run is interrupted (Ctrl-C, `timeout`, CI cancel).
    func cleanUpOnSignals() -> [any DispatchSourceSignal] {
        let folders = [staging, root]
        return [SIGINT, SIGTERM, SIGHUP].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                progress("interrupted; removing the benchmark folders")
                Fixtures.remove(folders)
                exit(128 + number)
            }
            source.resume()
            return source
        }
    }

    /// A fresh path for a vault in `root` (on the measured file system) or in `staging`.
    func newVaultPath(_ name: String, inStaging: Bool = false) -> FilePath {
        counter += 1
        let folder = inStaging ? staging : root
        return FilePath(folder.appendingPathComponent("\(name)-\(counter).lockbox").path)
    }

    /// A built vault of `size` items (tokens remembered in `tokens[size]`); built once per size.
    private var built: [Int: FilePath] = [:]

    func populatedVault(size: Int) throws -> FilePath {
        if let path = built[size] { return path }
        progress("building a vault of \(formatCount(size)) items…")
        let start = monotonicNanoseconds()
        let path = newVaultPath("populated-\(size)", inStaging: true)
        let vault = Vault(store: try EncryptedFileStore.create(at: path, credentials: [.keyFile(keyFile)]))
        var generator = SplitMix64(seed: UInt64(size))
        var values: [String] = []
        values.reserveCapacity(size)
        for index in 0..<size {
            let token = makeToken(&generator)
            let (service, account) = itemAddress(index)
            try vault.set(token, service: service, account: account, kind: .token)
            values.append(token)
        }
        tokens[size] = values
        built[size] = path
        progress("  built in \(formatDuration(Double(monotonicNanoseconds() - start)))")
        return path
    }

    /// A copy of the populated vault of `size` items, placed in `root` (or `staging`).
    func copyOfVault(size: Int, inStaging: Bool = false) throws -> FilePath {
        let source = try populatedVault(size: size)
        let target = newVaultPath("vault-\(size)", inStaging: inStaging)
        try FileManager.default.copyItem(atPath: source.string, toPath: target.string)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.string)
        return target
    }

    func token(size: Int, index: Int) throws -> String {
        guard let values = tokens[size], values.indices.contains(index) else {
            throw BenchError("internal: no token \(index) for the \(size)-item vault")
        }
        return values[index]
    }
}

// MARK: - Results

struct Row {
    var group: String
    var name: String
    var items: String
    var stats: Stats?
    var note: String = ""
}

final class Report {
    private(set) var rows: [Row] = []
    private(set) var notes: [String] = []

    func add(_ group: String, _ name: String, items: Int?, _ stats: Stats, note: String = "") {
        add(group, name, itemsLabel: items.map(formatCount) ?? "–", stats, note: note)
    }

    func add(_ group: String, _ name: String, itemsLabel: String, _ stats: Stats, note: String = "") {
        rows.append(Row(group: group, name: name, items: itemsLabel, stats: stats, note: note))
        progress(
            String(
                format: "  %@ %@ [%@]: median %@, p90 %@, p99 %@ (%d runs)",
                group, name, itemsLabel, formatDuration(stats.median),
                formatDuration(stats.percentile(90)), formatDuration(stats.percentile(99)), stats.count))
    }

    func skip(_ group: String, _ name: String, items: Int?, reason: String) {
        rows.append(Row(group: group, name: name, items: items.map(formatCount) ?? "–", stats: nil, note: "skipped: \(reason)"))
        progress("  \(group) \(name): skipped: \(reason)")
    }

    func note(_ text: String) { notes.append(text) }

    /// `lockbox get` / `secret-tool lookup` (medians), from the interleaved Secret Service runs.
    var processRatio: (lockbox: Stats, secretTool: Stats)?

    func stats(group: String, items: Int?) -> Stats? {
        let label = items.map(formatCount) ?? "–"
        return rows.first { $0.group == group && $0.items == label }?.stats
    }

    func markdown(quick: Bool) -> String {
        var out = ""
        out += "| Benchmark | Variant | Items | Runs | Median | p90 | p99 | ops/s |\n"
        out += "|---|---|---:|---:|---:|---:|---:|---:|\n"
        for row in rows {
            if let stats = row.stats {
                let name = row.note.isEmpty ? row.name : "\(row.name) (\(row.note))"
                out +=
                    "| \(row.group) | \(name) | \(row.items) | \(formatCount(stats.count)) "
                    + "| \(formatDuration(stats.median)) | \(formatDuration(stats.percentile(90))) "
                    + "| \(formatDuration(stats.percentile(99))) | \(formatRate(stats.opsPerSecond)) |\n"
            } else {
                out += "| \(row.group) | \(row.name) (\(row.note)) | \(row.items) | 0 | – | – | – | – |\n"
            }
        }
        out += "\nops/s is 1 / mean time per operation, one thread.\n"

        out += "\n#### Aims\n\n"
        if quick { out += "_Quick smoke run: too few iterations for these verdicts to mean anything._\n\n" }
        out += "| Aim | Target (median) | Measured median | Of target | Met? |\n|---|---:|---:|---:|:---:|\n"
        func aim(_ title: String, _ group: String, _ items: Int, limit: Double) {
            guard let stats = stats(group: group, items: items) else {
                out += "| \(title) | < \(formatDuration(limit)) | not measured | – | – |\n"
                return
            }
            let met = stats.median < limit
            let share = String(format: "%.0f%%", stats.median / limit * 100)
            out +=
                "| \(title) | < \(formatDuration(limit)) | \(formatDuration(stats.median)) | \(share) "
                + "| \(met ? "yes" : "**no**") |\n"
        }
        aim("in-process `get`, 10,000-item vault", Group.get, 10_000, limit: 20_000)
        for size in [10, 1_000, 10_000] {
            aim("`set` incl. fsync, \(formatCount(size))-item vault", Group.set, size, limit: 10_000_000)
        }
        for size in [10, 1_000, 10_000] {
            aim("`lockbox get` process, key file, \(formatCount(size))-item vault", Group.process, size, limit: 10_000_000)
        }
        aim("Secret Service in-process `get`, 1,000 items in the keyring", Group.keyringGet, 1_000, limit: 1_000_000)
        let ratioTitle = "`lockbox get` / `secret-tool lookup`, Secret Service, same item, same run"
        if let (lockbox, secretTool) = processRatio, secretTool.median > 0 {
            let ratio = lockbox.median / secretTool.median
            out +=
                "| \(ratioTitle) | ≤ 1.00 | \(String(format: "%.2f", ratio)) "
                + "(\(formatDuration(lockbox.median)) / \(formatDuration(secretTool.median))) "
                + "| \(String(format: "%.0f%%", ratio * 100)) | \(ratio <= 1.0 ? "yes" : "**no**") |\n"
        } else {
            out += "| \(ratioTitle) | ≤ 1.00 | not measured | – | – |\n"
        }
        if !notes.isEmpty {
            out += "\n" + notes.map { "- \($0)" }.joined(separator: "\n") + "\n"
        }
        return out
    }
}

enum Group {
    static let formatTwo = "format 2 (SQLite)"
    static let get = "get (in-process)"
    static let memoryGet = "get (MemoryStore, baseline)"
    static let set = "set (in-process)"
    static let setTmpfs = "set on tmpfs (diagnostic)"
    static let unlock = "unlock (`open`)"
    static let process = "`lockbox get` process"
    static let spawnBaseline = "process spawn baseline"
    static let secretTool = "`secret-tool lookup` process"
    static let keyringFill = "set (Secret Service, filling)"
    static let keyringGet = "get (Secret Service, in-process)"
    static let keyringLookupBaseline = "libsecret lookup (baseline)"
    static let keyringSet = "set (Secret Service, in-process)"
    static let keyringProcess = "`lockbox get` process, Secret Service"
    static let startup = "`lockbox` start-up"
    static let secretToolStore = "`secret-tool store` process"
}

// MARK: - Benchmarks

/// In-process `get` of a random item through `Vault`, from an open vault.
func benchGet(_ fixtures: Fixtures, _ report: Report, plan: Plan) throws {
    for size in plan.sizes {
        let path = try fixtures.copyOfVault(size: size)
        let vault = Vault(store: try EncryptedFileStore.open(at: path, credential: .keyFile(fixtures.keyFile)))
        let total = plan.getWarmup + plan.getIterations
        var generator = SplitMix64(seed: 42 &+ UInt64(size))
        let picks = (0..<total).map { _ in Int(generator.next() % UInt64(size)) }
        let addresses = (0..<size).map(itemAddress)
        // Correctness first, untimed.
        for index in [0, size - 1] {
            let (service, account) = addresses[index]
            guard try vault.string(service: service, account: account) == fixtures.token(size: size, index: index) else {
                throw BenchError("get returned the wrong secret for item \(index) of \(size)")
            }
        }
        var bytesRead = 0
        let stats = try measure(warmup: plan.getWarmup, iterations: plan.getIterations) { iteration in
            let (service, account) = addresses[picks[iteration]]
            guard let secret = try vault.get(service: service, account: account) else {
                throw BenchError("item \(picks[iteration]) missing from the \(size)-item vault")
            }
            bytesRead &+= secret.count
        }
        guard bytesRead > 0 else { throw BenchError("get read nothing") }
        report.add(Group.get, "EncryptedFileStore, random item", items: size, stats)
    }

    // Baseline: the same lookups in a MemoryStore (no file, no stat), largest size only.
    if let size = plan.sizes.last {
        let vault = Vault(store: MemoryStore())
        let addresses = (0..<size).map(itemAddress)
        for index in 0..<size {
            try vault.set(
                try fixtures.token(size: size, index: index),
                service: addresses[index].service, account: addresses[index].account, kind: .token)
        }
        var generator = SplitMix64(seed: 7)
        let picks = (0..<(plan.getWarmup + plan.getIterations)).map { _ in Int(generator.next() % UInt64(size)) }
        var bytesRead = 0
        let stats = try measure(warmup: plan.getWarmup, iterations: plan.getIterations) { iteration in
            let (service, account) = addresses[picks[iteration]]
            bytesRead &+= try vault.get(service: service, account: account)?.count ?? 0
        }
        guard bytesRead > 0 else { throw BenchError("MemoryStore get read nothing") }
        report.add(Group.memoryGet, "MemoryStore, random item", items: size, stats)
    }
}

/// In-process `set` overwriting a random existing item: re-encrypts the vault and replaces the
/// file atomically (write, fsync, rename, fsync folder) under the cross-process lock.
func benchSet(_ fixtures: Fixtures, _ report: Report, plan: Plan, group: String, inStaging: Bool, sizes: [Int]) throws {
    for size in sizes {
        let path = try fixtures.copyOfVault(size: size, inStaging: inStaging)
        let vault = Vault(store: try EncryptedFileStore.open(at: path, credential: .keyFile(fixtures.keyFile)))
        let total = plan.setWarmup + plan.setIterations
        var generator = SplitMix64(seed: 99 &+ UInt64(size))
        let picks = (0..<total).map { _ in Int(generator.next() % UInt64(size)) }
        let newTokens = (0..<total).map { _ in SecretBytes(utf8: makeToken(&generator)) }
        let addresses = (0..<size).map(itemAddress)
        // Flush what earlier steps left dirty (vault copies), so the first fsyncs do not pay for it.
        sync()
        let stats = try measure(warmup: plan.setWarmup, iterations: plan.setIterations) { iteration in
            let (service, account) = addresses[picks[iteration]]
            try vault.set(newTokens[iteration], service: service, account: account, kind: .token)
        }
        // The last write must be readable by a fresh handle.
        let check = Vault(store: try EncryptedFileStore.open(at: path, credential: .keyFile(fixtures.keyFile)))
        let last = total - 1
        let (service, account) = addresses[picks[last]]
        guard try check.get(service: service, account: account) == newTokens[last] else {
            throw BenchError("set: a fresh handle does not see the last write (\(size) items)")
        }
        guard try check.list().count == size else { throw BenchError("set changed the item count") }
        report.add(group, inStaging ? "overwrite random item, tmpfs" : "overwrite random item, fsync", items: size, stats)
    }
}

/// `EncryptedFileStore.open` per key-slot type.
func benchUnlock(_ fixtures: Fixtures, _ report: Report, plan: Plan) throws {
    for size in plan.sizes {
        let path = try fixtures.copyOfVault(size: size)
        let stats = try measure(warmup: plan.keyFileUnlockWarmup, iterations: plan.keyFileUnlockIterations) { _ in
            _ = try EncryptedFileStore.open(at: path, credential: .keyFile(fixtures.keyFile))
        }
        report.add(Group.unlock, "key-file slot", items: size, stats)
    }

    let passphrase = SecretBytes(utf8: "correct horse battery staple")
    let presets: [(String, KDFParameters, Int)] = [
        ("interactive", .interactive, plan.interactiveIterations),
        ("moderate", .moderate, plan.moderateIterations),
    ]
    for (name, kdf, iterations) in presets {
        let path = fixtures.newVaultPath("passphrase-\(name)")
        let created = Vault(store: try EncryptedFileStore.create(at: path, credentials: [.passphrase(passphrase)], kdf: kdf))
        for index in 0..<10 {
            let (service, account) = itemAddress(index)
            try created.set("token-\(index)", service: service, account: account, kind: .token)
        }
        let stats = try measure(warmup: plan.kdfWarmup, iterations: iterations) { _ in
            _ = try EncryptedFileStore.open(at: path, credential: .passphrase(passphrase))
        }
        report.add(Group.unlock, "passphrase slot, .\(name) \(kdf)", items: 10, stats)
    }
}

/// A finished child process: its exit status and standard output.
struct ChildResult {
    var status: Int32
    var output: Data
    var errorOutput: Data
    var nanoseconds: UInt64
    /// CPU time (user + system) the child used, from `RUSAGE_CHILDREN`.
    var cpuNanoseconds: UInt64
}

/// CPU time (user + system) of this process (`RUSAGE_SELF`, all threads) or of its reaped
/// children (`RUSAGE_CHILDREN`), in nanoseconds.
func cpuNanoseconds(_ who: Int32) -> UInt64 {
    var usage = rusage()
    getrusage(__rusage_who_t(who), &usage)
    func nanoseconds(_ time: timeval) -> UInt64 { UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_usec) &* 1_000 }
    return nanoseconds(usage.ru_utime) &+ nanoseconds(usage.ru_stime)
}

/// Runs a process to completion and times it from `run()` until it has exited and been reaped.
func runChild(
    _ executable: URL, _ arguments: [String], input: Data? = nil, environment: [String: String]? = nil
) throws -> ChildResult {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    let stdin = input.map { _ in Pipe() }
    process.standardInput = stdin ?? FileHandle.nullDevice
    // `waitUntilExit()` polls in 50 ms steps on Linux (swift-corelibs-foundation spins its run
    // loop with a 0.05 s timeout), which would swamp what is measured; the termination handler
    // fires as soon as the child is reaped.
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    let childCPUBefore = cpuNanoseconds(RUSAGE_CHILDREN.rawValue)
    let start = monotonicNanoseconds()
    try process.run()
    if let stdin, let input {
        try stdin.fileHandleForWriting.write(contentsOf: input)
        try stdin.fileHandleForWriting.close()
    }
    exited.wait()
    let elapsed = monotonicNanoseconds() &- start
    let childCPU = cpuNanoseconds(RUSAGE_CHILDREN.rawValue) &- childCPUBefore
    process.waitUntilExit()  // returns at once now; makes terminationStatus safe to read
    // Outputs are far smaller than a pipe buffer, so reading after the exit cannot block the child.
    let output = try stdout.fileHandleForReading.readToEnd() ?? Data()
    let errorOutput = try stderr.fileHandleForReading.readToEnd() ?? Data()
    return ChildResult(
        status: process.terminationStatus, output: output, errorOutput: errorOutput,
        nanoseconds: elapsed, cpuNanoseconds: childCPU)
}

/// The largest peak RSS of `runs` runs of a command, in KiB, as `/usr/bin/time -f %M` reports it
/// (`nil` without /usr/bin/time). Each run must exit 0.
func peakRSSKiB(_ executable: URL, _ arguments: [String], environment: [String: String], runs: Int) throws -> Int? {
    let time = URL(fileURLWithPath: "/usr/bin/time")
    guard FileManager.default.isExecutableFile(atPath: time.path) else { return nil }
    var peak = 0
    for _ in 0..<runs {
        let result = try runChild(time, ["-f", "%M", executable.path] + arguments, environment: environment)
        guard result.status == 0, let last = String(decoding: result.errorOutput, as: UTF8.self).split(separator: "\n").last,
            let kib = Int(last.trimmingCharacters(in: .whitespaces))
        else { throw BenchError("/usr/bin/time \(executable.lastPathComponent) exited with \(result.status)") }
        peak = max(peak, kib)
    }
    return peak
}

/// Times child processes: `warmup` untimed runs, then `iterations` timed runs, each checked.
func measureProcess(
    warmup: Int, iterations: Int, _ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
    check: (ChildResult) throws -> Void
) throws -> Stats {
    for _ in 0..<warmup { try check(try runChild(executable, arguments, environment: environment)) }
    var samples: [UInt64] = []
    samples.reserveCapacity(iterations)
    for _ in 0..<iterations {
        let result = try runChild(executable, arguments, environment: environment)
        try check(result)
        samples.append(result.nanoseconds)
    }
    return Stats(samples)
}

func findExecutable(_ name: String) -> URL? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for folder in path.split(separator: ":") where !folder.isEmpty {
        let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
}

func lockboxBinary(_ options: Options) -> URL? {
    if let explicit = options.lockboxPath { return URL(fileURLWithPath: explicit) }
    let own = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
    let sibling = own.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("lockbox")
    return FileManager.default.isExecutableFile(atPath: sibling.path) ? sibling : nil
}

/// `lockbox get` as a whole process with a key-file slot, plus a spawn baseline. (The
/// `secret-tool lookup` comparison is in the `secret-service` group.)
func benchProcesses(_ fixtures: Fixtures, _ report: Report, plan: Plan, options: Options) throws {
    // What spawning and reaping any process costs with Foundation's Process here.
    if let truePath = findExecutable("true") {
        let stats = try measureProcess(warmup: plan.processWarmup, iterations: plan.processIterations, truePath, []) {
            guard $0.status == 0 else { throw BenchError("`true` exited with \($0.status)") }
        }
        report.add(Group.spawnBaseline, "`\(truePath.path)` via Foundation.Process", items: nil, stats)
    }

    guard let lockbox = lockboxBinary(options), FileManager.default.isExecutableFile(atPath: lockbox.path) else {
        for size in plan.processSizes {
            report.skip(
                Group.process, "key-file slot", items: size,
                reason: "no lockbox binary next to the benchmark; build the `lockbox` product or pass --lockbox")
        }
        return
    }
    report.note(
        "`lockbox get` runs `\(lockbox.path)`; times span `Process.run()` until the child has exited (Foundation's termination handler).")
    for size in plan.processSizes {
        let path = try fixtures.copyOfVault(size: size)
        let index = size / 2
        let (service, account) = itemAddress(index)
        let expected = Data(try fixtures.token(size: size, index: index).utf8)
        let arguments = ["get", "--vault", path.string, "--key-file", fixtures.keyFile.string, service, account]
        let stats = try measureProcess(
            warmup: plan.processWarmup, iterations: plan.processIterations, lockbox, arguments,
            environment: fixtures.childEnvironment
        ) {
            guard $0.status == 0, $0.output == expected else {
                let message = String(decoding: $0.errorOutput, as: UTF8.self)
                throw BenchError("`lockbox get` exited with \($0.status) or printed the wrong secret: \(message)")
            }
        }
        report.add(Group.process, "key-file slot", items: size, stats)
    }
}

// MARK: - Vault format 2 (SQLite, sealed rows)

/// Format 2 beside format 1 at each size: populating through the streaming batch path (one
/// transaction), file size per item, in-process get, set (durable commit), open with a key file,
/// list, the whole `lockbox get` process and its peak RSS, and 8 writer processes. The format-1
/// rows of the other groups are the comparison (format 1 cannot be built at a million items).
func benchFormatTwo(_ fixtures: Fixtures, _ report: Report, plan: Plan, options: Options) throws {
    let sizes = options.formatTwoSizes ?? plan.sizes
    for size in sizes {
        progress("  format 2 at \(formatCount(size)) items…")
        let path = fixtures.newVaultPath("format2-\(size)")
        let store = try SQLiteVaultStore.create(at: path, credentials: [.keyFile(fixtures.keyFile)])
        var generator = SplitMix64(seed: UInt64(size))
        // Streamed: one write in memory at a time, as `lockbox import --json-lines` does.
        let populate = try measure(warmup: 0, iterations: 1) { _ in
            try store.set(streaming: { write in
                for index in 0..<size {
                    let (service, account) = itemAddress(index)
                    try write(
                        ItemWrite(
                            SecretBytes(utf8: makeToken(&generator)), for: ItemKey(service: service, account: account),
                            options: ItemOptions(kind: .token)))
                }
            })
        }
        // The size of the database once its write-ahead log is folded in (as after the last close).
        try SQLiteConnection(path: path, create: false, busyTimeout: .seconds(10)).execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let bytes = (try? FileManager.default.attributesOfItem(atPath: path.string)[.size] as? Int).flatMap { $0 } ?? 0
        report.add(
            Group.formatTwo, "populate through the batch path (one transaction, streamed)", items: size, populate,
            note: "file \(formatCount(bytes / max(size, 1))) bytes/item")
        var random = SplitMix64(seed: 42)
        let get = try measure(warmup: plan.getWarmup / 10, iterations: plan.getIterations / 10) { _ in
            let index = Int(random.next() % UInt64(size))
            let (service, account) = itemAddress(index)
            guard try store.get(ItemKey(service: service, account: account)) != nil else {
                throw BenchError("format 2: item \(index) missing")
            }
        }
        report.add(Group.formatTwo, "get, random item", items: size, get)
        let set = try measure(warmup: plan.setWarmup, iterations: plan.setIterations) { iteration in
            let index = Int(random.next() % UInt64(size))
            let (service, account) = itemAddress(index)
            try store.set(
                SecretBytes(utf8: "overwritten-\(iteration)"), for: ItemKey(service: service, account: account),
                options: ItemOptions(kind: .token))
        }
        report.add(Group.formatTwo, "set, overwrite random item, durable commit", items: size, set)
        if size == sizes.first {
            // What one durable write costs this file system: the floor under `set` (one fsync of
            // the write-ahead log per commit).
            let floor = try measure(warmup: plan.setWarmup, iterations: plan.setIterations) { _ in try fsyncFloor(beside: path) }
            report.add(Group.formatTwo, "baseline: append 4 KiB to a file + fsync", items: nil, floor)
        }
        let open = try measure(warmup: plan.keyFileUnlockWarmup, iterations: plan.keyFileUnlockIterations) { _ in
            _ = try SQLiteVaultStore.open(at: path, credentials: [.keyFile(fixtures.keyFile)])
        }
        report.add(Group.formatTwo, "open, key-file slot", items: size, open)
        let listIterations = size >= 100_000 ? 2 : size >= 10_000 ? max(2, plan.setIterations / 20) : plan.setIterations
        let list = try measure(warmup: size >= 100_000 ? 0 : 1, iterations: listIterations) { _ in
            var count = 0
            try store.list(service: nil) { _ in count += 1 }
            guard count == size else { throw BenchError("format 2: list lost items") }
        }
        report.add(Group.formatTwo, "list (metadata only, streamed)", items: size, list)
        guard let lockbox = lockboxBinary(options), FileManager.default.isExecutableFile(atPath: lockbox.path) else { continue }
        let (service, account) = itemAddress(size / 2)
        let value = try store.get(ItemKey(service: service, account: account)).map { $0.withUnsafeBytes { Data($0) } } ?? Data()
        let arguments = ["get", "--vault", path.string, "--key-file", fixtures.keyFile.string, service, account]
        let process = try measureProcess(
            warmup: plan.processWarmup, iterations: plan.processIterations, lockbox, arguments, environment: fixtures.childEnvironment
        ) {
            guard $0.status == 0, $0.output == value else {
                throw BenchError("format 2: `lockbox get` exited with \($0.status) or printed the wrong secret")
            }
        }
        let peak = try peakRSSKiB(lockbox, arguments, environment: fixtures.childEnvironment, runs: 5)
        report.add(
            Group.formatTwo, "`lockbox get` process, key-file slot", items: size, process,
            note: peak.map { "peak RSS \(String(format: "%.1f", Double($0) / 1024)) MiB (max of 5 runs)" } ?? "")
        try benchWriters(fixtures, report, path: path, size: size, sets: options.writerSets ?? (options.quick ? 25 : 1_000))
    }
}

/// Appends 4 KiB to a scratch file beside `path` and fsyncs it: one durable write, as a commit makes.
func fsyncFloor(beside path: FilePath) throws {
    let scratch = path.string + ".fsync-floor"
    let fd = open(scratch, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw BenchError("cannot open \(scratch)") }
    defer { close(fd) }
    let block = [UInt8](repeating: 0x5A, count: 4096)
    guard block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == 4096, fsync(fd) == 0 else {
        throw BenchError("writing \(scratch) failed")
    }
}

/// 8 writer processes (this executable in its writer role), each making `sets` durable sets of
/// its own items through the library at once: throughput, per-set latency, and a check that every
/// acknowledged write is in the vault with its value (zero lost, or the benchmark fails).
func benchWriters(_ fixtures: Fixtures, _ report: Report, path: FilePath, size: Int, sets: Int) throws {
    let writers = 8
    guard let own = Bundle.main.executableURL else { throw BenchError("cannot find this executable for the writer processes") }
    let start = monotonicNanoseconds()
    let results = try (0..<writers).map { worker -> (Process, Pipe) in
        let process = Process()
        process.executableURL = own
        var environment = fixtures.childEnvironment
        environment[WriterRole.variable] = "\(path.string)\n\(fixtures.keyFile.string)\n\(worker)\n\(sets)"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        return (process, output)
    }.map { process, output -> [UInt64] in
        let data = try output.fileHandleForReading.readToEnd() ?? Data()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("a writer process exited with \(process.terminationStatus)") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { UInt64($0) }
    }
    let elapsed = Double(monotonicNanoseconds() - start)
    let latencies = results.flatMap { $0 }
    guard latencies.count == writers * sets else { throw BenchError("writers acknowledged \(latencies.count) of \(writers * sets) sets") }
    let store = try SQLiteVaultStore.open(at: path, credentials: [.keyFile(fixtures.keyFile)])
    var lost = 0
    for worker in 0..<writers {
        for index in 0..<sets where try store.get(WriterRole.key(worker, index)) != WriterRole.value(worker, index) { lost += 1 }
    }
    guard lost == 0 else { throw BenchError("8 writers: \(lost) acknowledged writes lost") }
    let throughput = Double(writers * sets) / (elapsed / 1e9)
    report.add(
        Group.formatTwo, "8 writer processes × \(formatCount(sets)) sets, per set", items: size, Stats(latencies),
        note: "\(String(format: "%.0f", throughput)) sets/s together, \(formatDuration(elapsed)) in all, 0 lost")
}

/// A writer process of ``benchWriters(_:_:path:size:sets:)``: this executable started with
/// `LOCKBOX_BENCH_WRITER` = vault path, key-file path, worker number and set count (one a line).
/// It prints each set's latency in nanoseconds, one a line.
enum WriterRole {
    static let variable = "LOCKBOX_BENCH_WRITER"

    static func key(_ worker: Int, _ index: Int) -> ItemKey { ItemKey(service: "bench-writer-\(worker)", account: "item-\(index)") }
    static func value(_ worker: Int, _ index: Int) -> SecretBytes { SecretBytes(utf8: "written by \(worker) as number \(index)") }

    /// Runs the writer role if this process was started as one; `nil` otherwise.
    static func runIfAsked() throws -> Int32? {
        guard let spec = ProcessInfo.processInfo.environment[variable] else { return nil }
        let fields = spec.split(separator: "\n").map(String.init)
        guard fields.count == 4, let worker = Int(fields[2]), let sets = Int(fields[3]) else { throw BenchError("bad \(variable)") }
        let store = try SQLiteVaultStore.open(at: FilePath(fields[0]), credentials: [.keyFile(FilePath(fields[1]))])
        var lines = ""
        for index in 0..<sets {
            let start = monotonicNanoseconds()
            try store.set(value(worker, index), for: key(worker, index), options: ItemOptions(kind: .token))
            lines += "\(monotonicNanoseconds() - start)\n"
        }
        print(lines, terminator: "")
        return 0
    }
}

// MARK: - Secret Service

/// The address of keyring item `index`: 100 accounts per service, in a namespace of the
/// benchmark's own (`.invalid` cannot be anyone's real service), so cleaning up touches nothing else.
func keyringAddress(_ index: Int) -> (service: String, account: String) {
    ("lockbox-bench.invalid.service-\(index / 100)", "account-\(index)")
}

/// Removes every item in the benchmark's own services (whoever stored it); returns how many.
func removeKeyringItems(_ store: SecretServiceStore, count: Int) throws -> Int {
    var removed = 0
    for service in Set((0..<count).map { keyringAddress($0).service }).sorted() {
        removed += try store.wipe(service: service)
    }
    return removed
}

/// Looks one item up with bare libsecret on libsecret's shared `SecretService` connection (the
/// one `SecretServiceStore` uses too): a `SearchItems` and a `GetSecrets` call, nothing else.
/// The floor for an in-process `get` over D-Bus.
func libsecretLookup(_ service: OpaquePointer, service name: String, account: String) throws -> Data? {
    let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)
    defer { g_hash_table_unref(table) }
    g_hash_table_insert(table, g_strdup("service"), g_strdup(name))
    g_hash_table_insert(table, g_strdup("username"), g_strdup(account))
    var error: UnsafeMutablePointer<GError>?
    let value = secret_service_lookup_sync(service, nil, table, nil, &error)
    if let error {
        defer { g_error_free(error) }
        throw BenchError("secret_service_lookup_sync: \(error.pointee.message.map { String(cString: $0) } ?? "failed")")
    }
    guard let value else { return nil }
    defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
    var length = 0
    guard let bytes = secret_value_get(value, &length) else { return Data() }
    return Data(bytes: bytes, count: length)
}

/// CPU time of the Secret Service provider (LOCKBOX_TEST_KEYRING_PID, which
/// scripts/dev/keyring-session.sh exports), so each row can say which side of the bus the time is on.
struct ProviderCPU {
    let pid: Int32?
    private let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    init() {
        pid = ProcessInfo.processInfo.environment["LOCKBOX_TEST_KEYRING_PID"].flatMap { Int32($0) }
    }

    /// User + system time from /proc/PID/stat (fields 14 and 15, in clock ticks), in nanoseconds.
    func nanoseconds() -> Double? {
        guard let pid, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name, which may hold spaces: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond * 1e9
    }
}

/// Where one benchmark's time went: CPU per operation in this process (all threads, including
/// GLib's D-Bus worker) and in the provider, averaged over the timed runs.
struct CPUSplit {
    var client: Double
    var provider: Double?

    var note: String {
        "CPU/op: client \(formatDuration(client))" + (provider.map { ", gnome-keyring \(formatDuration($0))" } ?? "")
    }
}

/// `measure`, plus this process's and the provider's CPU per timed run.
func measureWithCPU(
    warmup: Int, iterations: Int, provider: ProviderCPU, _ body: (Int) throws -> Void
) rethrows -> (Stats, CPUSplit) {
    for index in 0..<warmup { try body(index) }
    let clientBefore = cpuNanoseconds(RUSAGE_SELF.rawValue)
    let providerBefore = provider.nanoseconds()
    let stats = try measure(warmup: 0, iterations: iterations) { try body(warmup + $0) }
    let client = Double(cpuNanoseconds(RUSAGE_SELF.rawValue) &- clientBefore) / Double(max(iterations, 1))
    var providerShare: Double?
    if let providerBefore, let providerAfter = provider.nanoseconds() {
        providerShare = (providerAfter - providerBefore) / Double(max(iterations, 1))
    }
    return (stats, CPUSplit(client: client, provider: providerShare))
}

/// The Secret Service benchmarks, against the running provider (gnome-keyring under
/// scripts/dev/keyring-session.sh): fill `plan.keyringItems` items through `SecretServiceStore`, then
/// in-process `get` and `set` with one reused connection next to a bare-libsecret floor, and
/// `lockbox get` versus `secret-tool lookup` as whole processes, interleaved, on the same item.
func benchSecretService(_ fixtures: Fixtures, _ report: Report, plan: Plan, options: Options) throws {
    let size = plan.keyringItems
    let mode = ProcessInfo.processInfo.environment["LOCKBOX_TEST_KEYRING"]
    guard mode == "unlocked" else {
        let reason = "needs LOCKBOX_TEST_KEYRING=unlocked (is \(mode.map { "'\($0)'" } ?? "unset"))"
        for (group, name) in [
            (Group.keyringGet, "SecretServiceStore"), (Group.keyringSet, "SecretServiceStore"),
            (Group.keyringProcess, "`lockbox --backend secret-service get`"), (Group.secretTool, "`secret-tool lookup`"),
        ] {
            report.skip(group, name, items: size, reason: reason)
        }
        report.note(
            "The Secret Service rows were skipped: they store \(formatCount(size)) items in the keyring, so they "
                + "run only against a throwaway one. Run `scripts/dev/keyring-session.sh -- LockboxBenchmarks …` "
                + "(`make bench` does), which starts a private, unlocked gnome-keyring and sets LOCKBOX_TEST_KEYRING=unlocked.")
        return
    }

    let provider = ProviderCPU()
    let store = try SecretServiceStore(timeout: 10)
    guard try !store.isLocked() else {
        throw BenchError("LOCKBOX_TEST_KEYRING=unlocked, but the Secret Service's default collection is locked")
    }
    let vault = Vault(store: store)
    var generator = SplitMix64(seed: 0x5EC2E7)
    var tokens = (0..<size).map { _ in makeToken(&generator) }
    let addresses = (0..<size).map(keyringAddress)

    var removedAtEnd = false
    defer {
        if !removedAtEnd { _ = try? removeKeyringItems(store, count: size) }
    }
    // Start from an empty namespace, so the fill row always measures new items.
    _ = try removeKeyringItems(store, count: size)

    // Fill, one `set` at a time (there is no bulk API); every set is timed as the keyring grows.
    progress("filling the keyring with \(formatCount(size)) items through SecretServiceStore.set…")
    let fillStart = monotonicNanoseconds()
    let (fillStats, fillCPU) = try measureWithCPU(warmup: 0, iterations: size, provider: provider) { index in
        try vault.set(tokens[index], service: addresses[index].service, account: addresses[index].account, kind: .token)
    }
    let fillTime = Double(monotonicNanoseconds() &- fillStart)
    progress("  filled in \(formatDuration(fillTime))")
    report.add(
        Group.keyringFill, "SecretServiceStore, new item", itemsLabel: "0 → \(formatCount(size))", fillStats,
        note: fillCPU.note)

    // In-process get of a random item, connection reused. Correctness first, untimed.
    for index in [0, size / 2, size - 1] {
        let (service, account) = addresses[index]
        guard try vault.string(service: service, account: account) == tokens[index] else {
            throw BenchError("Secret Service get returned the wrong secret for item \(index)")
        }
    }
    progress("Secret Service get…")
    let getPicks = (0..<(plan.keyringGetWarmup + plan.keyringGetIterations)).map { _ in Int(generator.next() % UInt64(size)) }
    var bytesRead = 0
    let (getStats, getCPU) = try measureWithCPU(
        warmup: plan.keyringGetWarmup, iterations: plan.keyringGetIterations, provider: provider
    ) { iteration in
        let (service, account) = addresses[getPicks[iteration]]
        guard let secret = try vault.get(service: service, account: account) else {
            throw BenchError("item \(getPicks[iteration]) missing from the keyring")
        }
        bytesRead &+= secret.count
    }
    guard bytesRead > 0 else { throw BenchError("Secret Service get read nothing") }
    report.add(
        Group.keyringGet, "SecretServiceStore via Vault, random item, connection reused", items: size, getStats,
        note: getCPU.note)

    // A miss: `get` then also asks whether the collection is locked (a locked keyring looks empty).
    let missIterations = max(plan.keyringGetIterations / 4, 10)
    let missWarmup = max(plan.keyringGetWarmup / 4, 2)
    let (missStats, missCPU) = try measureWithCPU(warmup: missWarmup, iterations: missIterations, provider: provider) { iteration in
        guard try vault.get(service: addresses[iteration % size].service, account: "absent-\(iteration)") == nil else {
            throw BenchError("an absent item was found")
        }
    }
    report.add(
        Group.keyringGet, "SecretServiceStore via Vault, absent item (returns nil)", items: size, missStats,
        note: missCPU.note)

    // The floor: bare libsecret, same shared connection, same picks. Lockbox's own client does not
    // load libsecret, so the benchmark loads it (CLibsecretFallback.h) before its first call.
    var loadMessage = [CChar](repeating: 0, count: 512)
    guard lockbox_libsecret_load(&loadMessage, loadMessage.count) != 0 else {
        let detail = String(decoding: loadMessage.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        throw BenchError("libsecret could not be loaded for the floor: \(detail)")
    }
    var connectError: UnsafeMutablePointer<GError>?
    if let service = secret_service_get_sync(SECRET_SERVICE_OPEN_SESSION, nil, &connectError) {
        defer { g_object_unref(UnsafeMutableRawPointer(service)) }
        var floorBytes = 0
        let (floorStats, floorCPU) = try measureWithCPU(
            warmup: plan.keyringGetWarmup, iterations: plan.keyringGetIterations, provider: provider
        ) { iteration in
            let index = getPicks[iteration]
            guard let secret = try libsecretLookup(service, service: addresses[index].service, account: addresses[index].account),
                secret == Data(tokens[index].utf8)
            else { throw BenchError("libsecret lookup of item \(index) failed or returned the wrong secret") }
            floorBytes &+= secret.count
        }
        guard floorBytes > 0 else { throw BenchError("libsecret lookup read nothing") }
        report.add(
            Group.keyringLookupBaseline, "bare `secret_service_lookup_sync`, same connection, random item",
            items: size, floorStats, note: floorCPU.note)
    } else {
        if let connectError { g_error_free(connectError) }
        report.note("The bare libsecret baseline could not connect, so it is missing.")
    }

    // In-process set, overwriting a random existing item.
    progress("Secret Service set…")
    let setTotal = plan.keyringSetWarmup + plan.keyringSetIterations
    let setPicks = (0..<setTotal).map { _ in Int(generator.next() % UInt64(size)) }
    let newTokens = (0..<setTotal).map { _ in makeToken(&generator) }
    let (setStats, setCPU) = try measureWithCPU(
        warmup: plan.keyringSetWarmup, iterations: plan.keyringSetIterations, provider: provider
    ) { iteration in
        let index = setPicks[iteration]
        try vault.set(newTokens[iteration], service: addresses[index].service, account: addresses[index].account, kind: .token)
        tokens[index] = newTokens[iteration]
    }
    let lastIndex = setPicks[setTotal - 1]
    guard try vault.string(service: addresses[lastIndex].service, account: addresses[lastIndex].account) == tokens[lastIndex] else {
        throw BenchError("Secret Service set: the last write is not what get returns")
    }
    let sameService = addresses[lastIndex].service
    guard try vault.list(service: sameService).count == addresses.filter({ $0.service == sameService }).count else {
        throw BenchError("Secret Service set changed the number of items in \(sameService)")
    }
    report.add(Group.keyringSet, "SecretServiceStore via Vault, overwrite random item", items: size, setStats, note: setCPU.note)

    try benchSecretServiceProcesses(
        fixtures, report, plan: plan, options: options, provider: provider,
        address: addresses[size / 2], secret: tokens[size / 2], size: size)

    let removeStart = monotonicNanoseconds()
    let removed = try removeKeyringItems(store, count: size)
    removedAtEnd = true
    report.note(
        "Secret Service rows ran against gnome-keyring on a private session bus (scripts/dev/keyring-session.sh), "
            + "with \(formatCount(size)) items stored through `SecretServiceStore` one `set` at a time: filling took "
            + "\(formatDuration(fillTime)); removing the \(formatCount(removed)) items afterwards (`wipe(service:)`) took "
            + "\(formatDuration(Double(monotonicNanoseconds() &- removeStart))). \"CPU/op\" is CPU time per timed run in the "
            + "benchmark process (all threads) or its child, and in gnome-keyring-daemon (from /proc, 10 ms ticks, averaged); "
            + "the bus daemon's share is not counted.")
}

/// Whole processes on the same keyring item, interleaved (the order rotates every round so no
/// command always follows another): `lockbox --backend secret-service get`, `secret-tool lookup`,
/// and `lockbox --version` for the CLI's start-up alone; then `secret-tool store` as the
/// provider's cost of a write.
func benchSecretServiceProcesses(
    _ fixtures: Fixtures, _ report: Report, plan: Plan, options: Options, provider: ProviderCPU,
    address: (service: String, account: String), secret: String, size: Int
) throws {
    let lockbox = lockboxBinary(options).flatMap { FileManager.default.isExecutableFile(atPath: $0.path) ? $0 : nil }
    let secretTool = findExecutable("secret-tool")
    if lockbox == nil {
        report.skip(
            Group.keyringProcess, "`lockbox --backend secret-service get`", items: size,
            reason: "no lockbox binary next to the benchmark; build the `lockbox` product or pass --lockbox")
    }
    if secretTool == nil {
        report.skip(Group.secretTool, "`secret-tool lookup`", items: size, reason: "secret-tool is not installed")
    }
    guard lockbox != nil || secretTool != nil else { return }
    progress("Secret Service processes…")

    let expected = Data(secret.utf8)
    struct Command {
        var executable: URL
        var arguments: [String]
        var output: Data?  // nil: any output
        var samples: [UInt64] = []
        var cpu: UInt64 = 0
        var providerCPU: Double = 0
    }
    var commands: [Command] = []
    if let lockbox {
        commands.append(
            Command(
                executable: lockbox, arguments: ["--backend", "secret-service", "get", address.service, address.account],
                output: expected))
        commands.append(Command(executable: lockbox, arguments: ["--version"], output: nil))
    }
    if let secretTool {
        commands.append(
            Command(
                executable: secretTool, arguments: ["lookup", "service", address.service, "username", address.account],
                output: expected))
    }
    func run(_ command: Command) throws -> ChildResult {
        let result = try runChild(command.executable, command.arguments, environment: fixtures.childEnvironment)
        // Neither tool adds a newline when its output is not a terminal.
        guard result.status == 0, command.output.map({ result.output == $0 }) ?? true else {
            throw BenchError(
                "`\(command.executable.lastPathComponent) \(command.arguments.joined(separator: " "))` exited with "
                    + "\(result.status) or printed the wrong secret: \(String(decoding: result.errorOutput, as: UTF8.self))")
        }
        return result
    }
    for _ in 0..<plan.keyringProcessWarmup {
        for command in commands { _ = try run(command) }
    }
    for round in 0..<plan.keyringProcessIterations {
        for offset in 0..<commands.count {
            let slot = (round + offset) % commands.count
            let providerBefore = provider.nanoseconds()
            let result = try run(commands[slot])
            commands[slot].samples.append(result.nanoseconds)
            commands[slot].cpu &+= result.cpuNanoseconds
            if let providerBefore, let providerAfter = provider.nanoseconds() {
                commands[slot].providerCPU += providerAfter - providerBefore
            }
        }
    }
    func split(_ command: Command) -> CPUSplit {
        let runs = Double(max(command.samples.count, 1))
        return CPUSplit(client: Double(command.cpu) / runs, provider: provider.pid == nil ? nil : command.providerCPU / runs)
    }
    var lockboxStats: Stats?
    var toolStats: Stats?
    for command in commands {
        let stats = Stats(command.samples)
        switch command.arguments.first {
        case "--backend":
            lockboxStats = stats
            report.add(
                Group.keyringProcess, "`lockbox --backend secret-service get S A`", items: size, stats,
                note: split(command).note)
        case "--version":
            report.add(Group.startup, "`lockbox --version` (no store opened)", items: nil, stats, note: split(command).note)
        default:
            toolStats = stats
            report.add(
                Group.secretTool, "`secret-tool lookup service S username A`, same item", items: size, stats,
                note: split(command).note)
        }
    }
    if let lockboxStats, let toolStats {
        report.processRatio = (lockboxStats, toolStats)
    }

    // The provider's cost of a write, for comparison with SecretServiceStore.set: secret-tool
    // storing one item (replaced each time) in the same, full keyring.
    if let secretTool {
        let attributes = ["service", address.service, "username", "secret-tool-store"]
        let runs = max(plan.keyringSetIterations / 8, 3)
        var samples: [UInt64] = []
        var cpu: UInt64 = 0
        var providerCPU = 0.0
        for run in 0...runs {  // run 0, which creates the item, is the warm-up
            let providerBefore = provider.nanoseconds()
            let result = try runChild(
                secretTool, ["store", "--label=lockbox benchmark"] + attributes,
                input: Data(secret.utf8), environment: fixtures.childEnvironment)
            guard result.status == 0 else {
                throw BenchError("`secret-tool store` exited with \(result.status): \(String(decoding: result.errorOutput, as: UTF8.self))")
            }
            if run == 0 { continue }
            samples.append(result.nanoseconds)
            cpu &+= result.cpuNanoseconds
            if let providerBefore, let providerAfter = provider.nanoseconds() { providerCPU += providerAfter - providerBefore }
        }
        let split = CPUSplit(client: Double(cpu) / Double(runs), provider: provider.pid == nil ? nil : providerCPU / Double(runs))
        report.add(Group.secretToolStore, "`secret-tool store`, overwrite one item", items: size, Stats(samples), note: split.note)
    }
}

// MARK: - Main

func run() throws -> Int32 {
    if let status = try WriterRole.runIfAsked() { return status }
    let options = Options.parseOrExit()
    let plan = options.quick ? Plan.quick : Plan.full
    let fixtures = try Fixtures(parent: options.parentDirectory)
    defer { fixtures.cleanUp() }
    let signalSources = fixtures.cleanUpOnSignals()
    defer { signalSources.forEach { $0.cancel() } }
    progress("benchmark folder \(fixtures.root.path) (vaults built in \(fixtures.staging.path))")
    let report = Report()
    let started = monotonicNanoseconds()

    // Build the file vaults the chosen groups need up front, so their progress comes first.
    var sizes: [Int] = []
    if !options.only.isDisjoint(with: ["get", "set", "unlock"]) { sizes += plan.sizes }
    if options.only.contains("process") { sizes += plan.processSizes }
    for size in Set(sizes).sorted() { _ = try fixtures.populatedVault(size: size) }
    if options.only.contains("get") {
        progress("get…")
        try benchGet(fixtures, report, plan: plan)
    }
    if options.only.contains("set") {
        progress("set…")
        try benchSet(fixtures, report, plan: plan, group: Group.set, inStaging: false, sizes: plan.sizes)
        if fixtures.staging.path.hasPrefix("/dev/shm/") {
            try benchSet(
                fixtures, report, plan: plan, group: Group.setTmpfs, inStaging: true,
                sizes: [plan.sizes.first, plan.sizes.last].compactMap { $0 })
        }
    }
    if options.only.contains("unlock") {
        progress("unlock…")
        try benchUnlock(fixtures, report, plan: plan)
    }
    if options.only.contains("process") {
        progress("processes…")
        try benchProcesses(fixtures, report, plan: plan, options: options)
    }
    if options.only.contains("format2") {
        progress("format 2…")
        try benchFormatTwo(fixtures, report, plan: plan, options: options)
    }
    if options.only.contains("secret-service") {
        progress("Secret Service…")
        try benchSecretService(fixtures, report, plan: plan, options: options)
    }

    var concurrencySection = ""
    if options.only.contains("concurrency") {
        progress("concurrent token reads and writes…")
        concurrencySection = try benchConcurrency(fixtures, plan: plan)
    }

    if !sizes.isEmpty {
        report.note(
            "Vault files live in `\(fixtures.root.deletingLastPathComponent().path)` (the fsync in `set` hits that file system); "
                + "items are 40-byte tokens, 100 accounts per service.")
    }
    if options.quick {
        report.note(
            "Quick smoke run (`--quick`): few iterations, vaults of at most 1,000 items, "
                + "\(formatCount(plan.keyringItems)) items in the keyring.")
    }
    print(report.markdown(quick: options.quick), terminator: "")
    if !concurrencySection.isEmpty { print("\n" + concurrencySection, terminator: "") }
    progress("done in \(formatDuration(Double(monotonicNanoseconds() - started)))")
    return 0
}

do {
    exit(try run())
} catch {
    FileHandle.standardError.write(Data("LockboxBenchmarks: error: \(error)\n".utf8))
    exit(1)
}

// LockboxBenchmarks: a plain release-mode benchmark of the Lockbox library and the `lockbox` CLI.
//
//     swift build -c release --scratch-path .build-bench
//     .build-bench/release/LockboxBenchmarks            # full run, about a minute and a half
//     .build-bench/release/LockboxBenchmarks --quick    # smoke run, seconds (CI)
//
// Results go to standard output as Markdown; progress goes to standard error. Every vault lives
// in a fresh temporary folder that is deleted at the end, whatever happens.
//
// No external benchmark package: each operation is timed on its own with CLOCK_MONOTONIC after a
// warm-up, and the report gives the median, p90 and p99 (nearest rank) and ops/s (from the mean).

import Foundation
import Lockbox
import SystemPackage

// MARK: - Options

struct Options {
    var quick = false
    /// Where the temporary benchmark folder is made (default: the system temporary folder).
    var parentDirectory: String?
    /// The `lockbox` binary; default: next to this executable.
    var lockboxPath: String?
    /// Which benchmark groups to run (default: all).
    var only: Set<String> = Options.groups

    static let groups: Set<String> = ["get", "set", "unlock", "process"]

    static let usage = """
        usage: LockboxBenchmarks [--quick] [--dir PATH] [--lockbox PATH] [--only LIST]

          --quick           a short smoke run (few iterations, vaults of up to 1,000 items)
          --dir PATH        make the temporary benchmark folder under PATH (default: $TMPDIR or /tmp);
                            it must be on the file system whose fsync you want to measure
          --lockbox PATH    the lockbox binary for the process benchmark
                            (default: `lockbox` next to this executable)
          --only LIST       run only these groups, comma-separated: get, set, unlock, process
                            (handy under a profiler)
        """

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--quick": options.quick = true
            case "--dir":
                guard let value = rest.popFirst() else { throw BenchError("--dir needs a path") }
                options.parentDirectory = value
            case "--lockbox":
                guard let value = rest.popFirst() else { throw BenchError("--lockbox needs a path") }
                options.lockboxPath = value
            case "--only":
                guard let value = rest.popFirst() else { throw BenchError("--only needs a list") }
                let chosen = Set(value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                guard !chosen.isEmpty, chosen.isSubset(of: groups) else {
                    throw BenchError("--only takes a comma-separated list of: \(groups.sorted().joined(separator: ", "))")
                }
                options.only = chosen
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                throw BenchError("unknown argument '\(argument)'\n\(usage)")
            }
        }
        return options
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

    static let full = Plan(
        sizes: [10, 1_000, 10_000], processSizes: [10, 1_000, 10_000],
        getIterations: 200_000, getWarmup: 20_000,
        setIterations: 200, setWarmup: 10,
        keyFileUnlockIterations: 200, keyFileUnlockWarmup: 10,
        interactiveIterations: 10, moderateIterations: 5, kdfWarmup: 1,
        processIterations: 200, processWarmup: 10)

    static let quick = Plan(
        sizes: [10, 1_000], processSizes: [10, 1_000],
        getIterations: 2_000, getWarmup: 200,
        setIterations: 10, setWarmup: 2,
        keyFileUnlockIterations: 10, keyFileUnlockWarmup: 2,
        interactiveIterations: 2, moderateIterations: 1, kdfWarmup: 0,
        processIterations: 10, processWarmup: 2)
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
    private(set) var tokens: [Int: [String]] = [:]
    private var counter = 0

    init(parent: String?) throws {
        let base = parent.map { URL(fileURLWithPath: $0, isDirectory: true) }
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
        rows.append(Row(group: group, name: name, items: items.map(formatCount) ?? "–", stats: stats, note: note))
        progress(String(format: "  %@ %@ [%@]: median %@, p90 %@, p99 %@ (%d runs)",
                        group, name, items.map(formatCount) ?? "-", formatDuration(stats.median),
                        formatDuration(stats.percentile(90)), formatDuration(stats.percentile(99)), stats.count))
    }

    func skip(_ group: String, _ name: String, items: Int?, reason: String) {
        rows.append(Row(group: group, name: name, items: items.map(formatCount) ?? "–", stats: nil, note: "skipped: \(reason)"))
        progress("  \(group) \(name): skipped: \(reason)")
    }

    func note(_ text: String) { notes.append(text) }

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
                out += "| \(row.group) | \(name) | \(row.items) | \(formatCount(stats.count)) "
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
            out += "| \(title) | < \(formatDuration(limit)) | \(formatDuration(stats.median)) | \(share) "
                + "| \(met ? "yes" : "**no**") |\n"
        }
        aim("in-process `get`, 10,000-item vault", Group.get, 10_000, limit: 20_000)
        for size in [10, 1_000, 10_000] {
            aim("`set` incl. fsync, \(formatCount(size))-item vault", Group.set, size, limit: 10_000_000)
        }
        for size in [10, 1_000, 10_000] {
            aim("`lockbox get` process, key file, \(formatCount(size))-item vault", Group.process, size, limit: 10_000_000)
        }
        if !notes.isEmpty {
            out += "\n" + notes.map { "- \($0)" }.joined(separator: "\n") + "\n"
        }
        return out
    }
}

enum Group {
    static let get = "get (in-process)"
    static let memoryGet = "get (MemoryStore, baseline)"
    static let set = "set (in-process)"
    static let setTmpfs = "set on tmpfs (diagnostic)"
    static let unlock = "unlock (`open`)"
    static let process = "`lockbox get` process"
    static let spawnBaseline = "process spawn baseline"
    static let secretTool = "`secret-tool lookup` process"
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
            try vault.set(try fixtures.token(size: size, index: index),
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
}

/// Runs a process to completion and times it from `run()` until it has exited and been reaped.
func runChild(_ executable: URL, _ arguments: [String], input: Data? = nil) throws -> ChildResult {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let stdout = Pipe(), stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    let stdin = input.map { _ in Pipe() }
    process.standardInput = stdin ?? FileHandle.nullDevice
    // `waitUntilExit()` polls in 50 ms steps on Linux (swift-corelibs-foundation spins its run
    // loop with a 0.05 s timeout), which would swamp what is measured; the termination handler
    // fires as soon as the child is reaped.
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    let start = monotonicNanoseconds()
    try process.run()
    if let stdin, let input {
        try stdin.fileHandleForWriting.write(contentsOf: input)
        try stdin.fileHandleForWriting.close()
    }
    exited.wait()
    let elapsed = monotonicNanoseconds() &- start
    process.waitUntilExit()  // returns at once now; makes terminationStatus safe to read
    // Outputs are far smaller than a pipe buffer, so reading after the exit cannot block the child.
    let output = try stdout.fileHandleForReading.readToEnd() ?? Data()
    let errorOutput = try stderr.fileHandleForReading.readToEnd() ?? Data()
    return ChildResult(status: process.terminationStatus, output: output, errorOutput: errorOutput, nanoseconds: elapsed)
}

/// Times child processes: `warmup` untimed runs, then `iterations` timed runs, each checked.
func measureProcess(
    warmup: Int, iterations: Int, _ executable: URL, _ arguments: [String], check: (ChildResult) throws -> Void
) throws -> Stats {
    for _ in 0..<warmup { try check(try runChild(executable, arguments)) }
    var samples: [UInt64] = []
    samples.reserveCapacity(iterations)
    for _ in 0..<iterations {
        let result = try runChild(executable, arguments)
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

/// `lockbox get` as a whole process with a key-file slot, plus a spawn baseline and, when
/// available, `secret-tool lookup` for comparison.
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
            report.skip(Group.process, "key-file slot", items: size,
                        reason: "no lockbox binary next to the benchmark; build the `lockbox` product or pass --lockbox")
        }
        return
    }
    report.note("`lockbox get` runs `\(lockbox.path)`; times span `Process.run()` until the child has exited (Foundation's termination handler).")
    for size in plan.processSizes {
        let path = try fixtures.copyOfVault(size: size)
        let index = size / 2
        let (service, account) = itemAddress(index)
        let expected = Data(try fixtures.token(size: size, index: index).utf8)
        let arguments = ["get", "--vault", path.string, "--key-file", fixtures.keyFile.string, service, account]
        let stats = try measureProcess(warmup: plan.processWarmup, iterations: plan.processIterations, lockbox, arguments) {
            guard $0.status == 0, $0.output == expected else {
                let message = String(decoding: $0.errorOutput, as: UTF8.self)
                throw BenchError("`lockbox get` exited with \($0.status) or printed the wrong secret: \(message)")
            }
        }
        report.add(Group.process, "key-file slot", items: size, stats)
    }

    guard let secretTool = findExecutable("secret-tool") else {
        report.note("`secret-tool` is not installed here, so there is no same-machine Secret Service comparison.")
        return
    }
    // Store one item in the running Secret Service, look it up repeatedly, then remove it.
    let attributes = ["service", "lockbox-bench.invalid", "account", "bench-\(getpid())"]
    let token = Data("lockbox-benchmark-token-0123456789abcdef".utf8)
    let stored = try runChild(secretTool, ["store", "--label=lockbox benchmark (safe to delete)"] + attributes, input: token)
    guard stored.status == 0 else {
        report.note("`secret-tool` is installed but storing a test item failed (no unlocked Secret Service?), so no comparison.")
        return
    }
    defer { _ = try? runChild(secretTool, ["clear"] + attributes) }
    let stats = try measureProcess(warmup: plan.processWarmup, iterations: plan.processIterations, secretTool, ["lookup"] + attributes) {
        guard $0.status == 0, $0.output.starts(with: token) else {
            throw BenchError("`secret-tool lookup` exited with \($0.status) or printed the wrong secret")
        }
    }
    report.add(Group.secretTool, "Secret Service", items: 1, stats)
}

// MARK: - Main

func run() throws -> Int32 {
    let options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
    let plan = options.quick ? Plan.quick : Plan.full
    let fixtures = try Fixtures(parent: options.parentDirectory)
    defer { fixtures.cleanUp() }
    let signalSources = fixtures.cleanUpOnSignals()
    defer { signalSources.forEach { $0.cancel() } }
    progress("benchmark folder \(fixtures.root.path) (vaults built in \(fixtures.staging.path))")
    let report = Report()
    let started = monotonicNanoseconds()

    let sizes = options.only == ["process"] ? plan.processSizes : plan.sizes + plan.processSizes
    for size in Set(sizes).sorted() { _ = try fixtures.populatedVault(size: size) }
    if options.only.contains("get") {
        progress("get…")
        try benchGet(fixtures, report, plan: plan)
    }
    if options.only.contains("set") {
        progress("set…")
        try benchSet(fixtures, report, plan: plan, group: Group.set, inStaging: false, sizes: plan.sizes)
        if fixtures.staging.path.hasPrefix("/dev/shm/") {
            try benchSet(fixtures, report, plan: plan, group: Group.setTmpfs, inStaging: true,
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

    report.note("Vault files live in `\(fixtures.root.deletingLastPathComponent().path)` (the fsync in `set` hits that file system); "
        + "items are 40-byte tokens, 100 accounts per service.")
    if options.quick { report.note("Quick smoke run (`--quick`): few iterations, vaults of at most 1,000 items.") }
    print(report.markdown(quick: options.quick), terminator: "")
    progress("done in \(formatDuration(Double(monotonicNanoseconds() - started)))")
    return 0
}

do {
    exit(try run())
} catch {
    FileHandle.standardError.write(Data("LockboxBenchmarks: error: \(error)\n".utf8))
    exit(1)
}

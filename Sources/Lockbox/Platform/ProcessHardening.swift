import CLinux
import FoundationEssentials
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Process-wide protections for programs that hold secrets in memory.
public enum ProcessHardening {
    /// Turns off core dumps (`RLIMIT_CORE` = 0) and marks the process non-dumpable
    /// (`prctl(PR_SET_DUMPABLE, 0)`), which also stops other processes of the same user from
    /// attaching a debugger or reading `/proc/PID/mem`. The `lockbox` CLI calls this first thing;
    /// call it early in a service that keeps a vault open. Returns whether both took effect.
    @discardableResult
    public static func apply() -> Bool {
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        let coreOff = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore) == 0
        let undumpable = lockbox_prctl_set_dumpable(0) == 0
        return coreOff && undumpable
    }

    /// What protects this process's secrets right now, as `lockbox doctor` reports it.
    public struct Status: Sendable, Equatable, Codable {
        /// `prctl(PR_GET_DUMPABLE)` is 0: no core dumps, no ptrace or /proc/PID/mem by same-user processes.
        public var nonDumpable: Bool
        /// The core-file size limit (`RLIMIT_CORE`) is 0.
        public var coreDumpsOff: Bool
        /// A secret allocated now sits in memory locked into RAM (`mlock`: never swapped).
        public var secretsLocked: Bool
        /// A secret allocated now sits in memory excluded from core dumps (`MADV_DONTDUMP`).
        public var secretsExcludedFromDumps: Bool
        /// The soft `RLIMIT_MEMLOCK` in bytes, or `nil` if unlimited.
        public var lockableBytes: UInt64?
    }

    /// Reads the protections in force: the process flags, and the flags the kernel shows in
    /// `/proc/self/smaps` for the memory a fresh ``SecretBytes`` gets.
    public static func status() -> Status {
        var core = rlimit()
        let coreOff = getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &core) == 0 && core.rlim_cur == 0
        var memlock = rlimit()
        let lockable: UInt64? =
            getrlimit(__rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue), &memlock) == 0 && memlock.rlim_cur != rlim_t.max
            ? UInt64(memlock.rlim_cur) : nil
        let probe = SecretBytes.random(count: 32)
        let address = probe.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        let flags = mappingFlags(containing: address)
        return Status(
            nonDumpable: lockbox_prctl_get_dumpable() == 0, coreDumpsOff: coreOff,
            secretsLocked: flags.contains("lo"), secretsExcludedFromDumps: flags.contains("dd"),
            lockableBytes: lockable)
    }

    /// The VmFlags of the mapping that holds `address` (empty if none is found).
    static func mappingFlags(containing address: UInt) -> Set<String> {
        mappings().first { $0.start <= address && address < $0.end }?.flags ?? []
    }

    /// One mapping of this process as /proc/self/smaps lists it: address range, permissions
    /// (`rw-p`, `---p`, ...) and the kernel's VmFlags (`lo` locked, `dd` not dumped, ...).
    struct Mapping: Sendable {
        var start: UInt, end: UInt, permissions: String, flags: Set<String>
    }

    /// Every mapping of this process, in address order (empty if /proc/self/smaps is unreadable).
    static func mappings() -> [Mapping] {
        // /proc files report size 0: read to the end rather than by size.
        guard let file = try? FileDescriptor.open("/proc/self/smaps", .readOnly, options: .closeOnExec) else { return [] }
        defer { try? file.close() }
        guard let bytes = try? file.readToEnd(limit: 64 << 20) else { return [] }
        let text = String(decoding: bytes, as: UTF8.self)
        var out: [Mapping] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), fields.count >= 2, !range.hasSuffix(":") {
                let bounds = range.split(separator: "-")
                if bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16) {
                    out.append(Mapping(start: start, end: end, permissions: String(fields[1]), flags: []))
                }
            } else if line.hasPrefix("VmFlags:"), !out.isEmpty {
                out[out.count - 1].flags = Set(fields.dropFirst().map(String.init))
            }
        }
        return out
    }
}

import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// A moment as the PIN lockout sees it: wall-clock time plus the boot it happened in and the
/// time since that boot. A lockout ends only when every clock Lockbox trusts agrees it has
/// passed (`secondsSince(_:)`): within one boot the smaller of the wall-clock and boot-clock
/// readings counts, so moving either clock forward changes nothing; across a reboot only the
/// wall clock is left, and a wall clock earlier than the last attempt restarts the lockout.
/// SECURITY.md ("The lockout clock") states the rule and the attacks it answers.
public struct PinInstant: Sendable, Codable, Equatable {
    /// Wall-clock time.
    public var wall: Date
    /// The kernel's ID for the current boot (`/proc/sys/kernel/random/boot_id`).
    public var bootID: String
    /// Seconds since boot (`CLOCK_BOOTTIME`: monotonic, counts suspend, not settable).
    public var sinceBoot: Double

    /// Creates an instant.
    public init(wall: Date, bootID: String, sinceBoot: Double) {
        self.wall = wall
        self.bootID = bootID
        self.sinceBoot = sinceBoot
    }

    /// Seconds from `earlier` to `self` that every trusted clock agrees have passed (negative if
    /// a clock now reads earlier, which restarts a lockout):
    /// - a reboot (another boot ID *and* a boot clock that restarted, reading less than it did at
    ///   `earlier`): the wall clock alone, the only clock that spans it;
    /// - otherwise the smaller of the wall-clock and boot-clock readings. This covers one boot,
    ///   and also a boot ID that changed while the boot clock ran on — not a reboot but a faked
    ///   `boot_id` (a bind mount in a user namespace), which must not hand the lockout to the
    ///   wall clock alone. A boot clock shifted forward for one process (a time namespace) or a
    ///   wall clock set forward can therefore only make the lockout last longer.
    func secondsSince(_ earlier: PinInstant) -> Double {
        let onWallClock = wall.timeIntervalSince(earlier.wall)
        let onBootClock = sinceBoot - earlier.sinceBoot
        if bootID != earlier.bootID && onBootClock < 0 { return onWallClock }
        return min(onWallClock, onBootClock)
    }
}

/// Where ``PinGuard`` gets the time; inject your own in tests.
public protocol PinClock: Sendable {
    /// The current instant.
    func now() -> PinInstant
}

/// The system's clocks: `Date()`, the boot ID and `CLOCK_BOOTTIME`.
///
/// `CLOCK_BOOTTIME` is read as the host counts it: in a time namespace (`unshare -T
/// --boottime N`, no root needed inside a user namespace) the process's own offset, from
/// `/proc/self/timens_offsets`, is taken off again.
public struct SystemPinClock: PinClock {
    private let bootID: String
    private let bootTimeOffset: Double

    /// Reads the boot ID and this process's time-namespace offset once.
    public init() {
        let raw = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        bootID = raw.trimmingWhiteSpace()
        let offsets = (try? String(contentsOfFile: "/proc/self/timens_offsets", encoding: .utf8)) ?? ""
        bootTimeOffset = Self.bootTimeOffset(inTimeNamespaceOffsets: offsets)
    }

    /// The `boottime` line of `/proc/self/timens_offsets` ("boottime SECONDS NANOSECONDS") in
    /// seconds; 0 without one.
    static func bootTimeOffset(inTimeNamespaceOffsets text: String) -> Double {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 3, fields[0] == "boottime" || fields[0] == "7",
                let seconds = Double(fields[1]), let nanoseconds = Double(fields[2])
            else { continue }
            return seconds + nanoseconds / 1e9
        }
        return 0
    }

    public func now() -> PinInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        // Without a boot ID, an empty one never matches a recorded one, so the wall clock rules.
        return PinInstant(
            wall: Date(), bootID: bootID.isEmpty ? "unknown-\(UUID())" : bootID,
            sinceBoot: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9 - bootTimeOffset)
    }
}

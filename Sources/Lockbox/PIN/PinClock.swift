#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A moment as the PIN lockout sees it: wall-clock time plus the boot it happened in and the
/// time since that boot. Within one boot, lockouts are measured on the boot clock, which
/// nobody can set, so moving the wall clock (either way) changes nothing; across a reboot only
/// the wall clock is left, and a wall clock earlier than the last attempt restarts the lockout.
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

    /// Seconds from `earlier` to `self`: on the boot clock within one boot, else on the wall
    /// clock (negative if the wall clock is now earlier).
    func secondsSince(_ earlier: PinInstant) -> Double {
        if bootID == earlier.bootID { return sinceBoot - earlier.sinceBoot }
        return wall.timeIntervalSince(earlier.wall)
    }
}

/// Where ``PinGuard`` gets the time; inject your own in tests.
public protocol PinClock: Sendable {
    /// The current instant.
    func now() -> PinInstant
}

/// The system's clocks: `Date()`, the boot ID and `CLOCK_BOOTTIME`.
public struct SystemPinClock: PinClock {
    private let bootID: String

    /// Reads the boot ID once.
    public init() {
        let raw = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        bootID = raw.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public func now() -> PinInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        // Without a boot ID, an empty one never matches a recorded one, so the wall clock rules.
        return PinInstant(wall: Date(), bootID: bootID.isEmpty ? "unknown-\(UUID())" : bootID,
                          sinceBoot: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
    }
}

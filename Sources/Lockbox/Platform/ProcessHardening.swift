#if canImport(Glibc)
import Glibc
#endif
import CLinux

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
}

import SystemPackage

/// Which key files ``KeyFile/read(at:access:)`` accepts besides those only their owner can read.
///
/// A key file opens the vault, so by default it must be readable by its owner alone (mode 0600 or
/// 0400): a file that group or others can read is refused with
/// ``LockboxError/insecurePermissions(path:detail:)``.
///
/// Kubernetes mounts a secret's keys as files of mode 0644 (its `defaultMode`, 0420 in decimal) or
/// 0640 (with an `fsGroup`), owned by root, on a read-only file system that only the pod sees;
/// there "group or others" are the pod's own processes. ``readOnlyMount`` accepts exactly such a
/// file, as an explicit choice of the program's configuration:
/// - it is owned by root (uid 0), as the kubelet writes it;
/// - nobody but root may write it (no group or other write bit);
/// - the file system it is on is mounted read-only (`ST_RDONLY`), as Kubernetes mounts secret
///   volumes, so no process in the pod can replace it.
/// Anything else is refused as before, with the reason. Prefer a `defaultMode: 0400` on the
/// secret volume, which needs no opt-in, when the pod runs as root or as the file's owner.
/// systemd credentials (`LoadCredential=`, `$CREDENTIALS_DIRECTORY`) are already owner-only.
public enum KeyFileAccess: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Only files no one but their owner can read or write (the default).
    case ownerOnly = "owner-only"
    /// Also a group- or world-readable file owned by root, writable by root alone, on a read-only
    /// mount (a Kubernetes secret volume).
    case readOnlyMount = "read-only-mount"

    /// `owner-only` or `read-only-mount`.
    public var description: String { rawValue }

    /// Throws ``LockboxError/insecurePermissions(path:detail:)`` unless a key file that group or
    /// others can read meets every condition of ``readOnlyMount``.
    func acceptMountedKeyFile(path: FilePath, status: Stat, readOnly: Bool) throws {
        let mode = status.permissions.rawValue
        let refusal: String?
        if status.userID.rawValue != 0 {
            refusal = "it is owned by uid \(status.userID.rawValue), not root"
        } else if mode & 0o022 != 0 {
            refusal = "group or others may write it"
        } else if !readOnly {
            refusal = "its file system is not mounted read-only"
        } else {
            refusal = nil
        }
        if let refusal {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail:
                    "the key file is accessible by group or others (mode \(octal(mode))), and the read-only-mount exception does not apply: \(refusal). Fix it with `chmod 600 \(path.string)`, or mount it read-only, owned by root."
            )
        }
    }
}

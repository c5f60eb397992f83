import CKeyutils
import Lockbox

#if canImport(Glibc)
    import Glibc
#endif

/// Typed wrappers over the few libkeyutils calls Lockbox uses: `user` keys in the calling
/// process's session keyring, readable only by processes that possess them (that share the
/// session keyring), with a kernel-enforced expiry. Nothing here ever touches the disk.
package enum KernelKeyring {
    /// Adds (or replaces) a `user` key in the session keyring with possessor-only permissions and
    /// a timeout, then checks that it can be found again — some containers accept the call but
    /// never link the key anywhere a later process could find it.
    ///
    /// The corresponding C functions are `add_key`, `keyctl_setperm`, `keyctl_set_timeout` and `keyctl_search`.
    package static func add(description: String, payload: SecretBytes, timeoutSeconds: UInt32) throws -> Int32 {
        try requireLoginSessionKeyring()
        let id = payload.withUnsafeBytes { bytes in
            add_key("user", description, bytes.baseAddress, bytes.count, KEY_SPEC_SESSION_KEYRING)
        }
        guard id >= 0 else { throw unavailable("add_key", errno) }
        // Possessor only: no user, group or other bits, so a process of the same user outside this
        // login session cannot read it.
        if keyctl_setperm(id, UInt32(KEY_POS_ALL)) < 0 || keyctl_set_timeout(id, timeoutSeconds) < 0 {
            let error = errno
            _ = keyctl_invalidate(id)
            throw unavailable("keyctl_setperm/keyctl_set_timeout", error)
        }
        guard search(description: description) == id else {
            _ = keyctl_invalidate(id)
            throw LockboxError.kernelKeyringUnavailable(
                detail: "a key added to the session keyring cannot be found again (no login session keyring here?)")
        }
        return id
    }

    /// Throws unless this process has a session keyring of its own login session (pam_keyinit,
    /// `keyctl session`). Without one (cron, systemd services, `ssh` without pam_keyinit,
    /// containers), `add_key` would create a keyring for this process alone and the window would
    /// vanish when it exits; and the user's default session keyring, which the kernel lends such
    /// processes, is shared by every one of them, not one login. Asked without creating anything:
    /// with no session keyring the kernel answers with the user's default one.
    ///
    /// The corresponding C function is `keyctl_get_keyring_ID`.
    static func requireLoginSessionKeyring() throws {
        let session = keyctl_get_keyring_ID(KEY_SPEC_SESSION_KEYRING, 0)
        let userDefault = keyctl_get_keyring_ID(KEY_SPEC_USER_SESSION_KEYRING, 0)
        guard session < 0 || session == userDefault else { return }
        throw LockboxError.kernelKeyringUnavailable(
            detail: "this process has no login session keyring (cron, a systemd service, ssh without pam_keyinit, a container), "
                + "so a window would vanish when lockbox exits or be shared with every process of the user. Run lockbox inside "
                + "a session keyring (`keyctl session`, or a login with pam_keyinit) to use windows")
    }

    /// The key with `description` reachable from the session keyring, or `nil` (none, expired or revoked).
    ///
    /// The corresponding C function is `keyctl_search`.
    package static func search(description: String) -> Int32? {
        let id = keyctl_search(KEY_SPEC_SESSION_KEYRING, "user", description, 0)
        return id >= 0 ? Int32(id) : nil
    }

    /// The key's payload, or `nil` if it expired, was revoked or cannot be read.
    ///
    /// The corresponding C function is `keyctl_read_alloc`.
    package static func read(_ id: Int32) -> SecretBytes? {
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(id, &buffer)
        guard length >= 0, let buffer else { return nil }
        defer {
            UnsafeMutableRawBufferPointer(start: buffer, count: Int(length)).zeroize()
            free(buffer)
        }
        return SecretBytes(copying: UnsafeRawBufferPointer(start: buffer, count: Int(length)))
    }

    /// Makes the key unusable at once for everyone who can see it.
    ///
    /// The corresponding C function is `keyctl_invalidate` (falling back to `keyctl_revoke`).
    @discardableResult
    package static func invalidate(_ id: Int32) -> Bool {
        keyctl_invalidate(id) == 0 || keyctl_revoke(id) == 0
    }

    private static func unavailable(_ call: String, _ code: Int32) -> LockboxError {
        .kernelKeyringUnavailable(detail: "\(call) failed: \(String(cString: strerror(code)))")
    }
}

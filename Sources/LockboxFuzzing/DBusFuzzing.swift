import LockboxSecretService

extension FuzzingEntryPoints {
    // MARK: D-Bus messages

    /// A D-Bus message as the session bus would send it to Lockbox's own client
    /// (DBusConnection): `DBusMessage.length(startingWith:)` on the first bytes, as the connection
    /// frames its reads, then `DBusMessage.decode` of that many. A message that reads must write
    /// back (`encoded()`, little-endian) to bytes that read as the same message; and the length
    /// the header announces must be the length of what it re-encodes to when the input was
    /// little-endian and already canonical.
    package static func dbusMessage(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        guard let length = try? DBusMessage.length(startingWith: bytes[...]), length <= bytes.count else { return }
        guard let message = try? DBusMessage.decode(Array(bytes[0..<length])) else { return }
        let encoded: [UInt8]
        do {
            encoded = try message.encoded()
        } catch {
            fatalError("a message that was read does not write back: \(error)")
        }
        guard let again = try? DBusMessage.decode(encoded) else {
            fatalError("DBusMessage.encoded() wrote bytes that DBusMessage.decode refuses")
        }
        if again != message {
            fatalError("a message read, written and read again differs from the first reading")
        }
    }
}

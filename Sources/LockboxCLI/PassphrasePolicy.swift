import ArgumentParser
import Lockbox

/// The rule for new vault passphrases (`init`, `passwd`, `slot add-passphrase`, and a backup's
/// passphrase in `export`): at least ``minimumCharacters`` characters (Unicode code points), and
/// not one character repeated. It is NIST SP 800-63B's floor for a chosen secret, not a strength
/// estimate: a key file is the credential for services, a passphrase the one a person types.
/// `--allow-weak-passphrase` accepts any non-empty passphrase. The passphrase is inspected in
/// place: no copy of it is made.
enum PassphrasePolicy {
    /// The fewest characters a new passphrase may have.
    static let minimumCharacters = 8

    /// The help of every command's `--allow-weak-passphrase`.
    static let overrideHelp = "Accept a new passphrase shorter than \(minimumCharacters) characters, or one character repeated."

    /// Throws ``CLIError/passphraseRejected(_:)`` unless `passphrase` follows the rule (or `allowWeak`).
    ///
    /// - Parameters:
    ///   - passphrase: The new passphrase.
    ///   - what: What it is, for the message ("passphrase", "backup passphrase").
    ///   - allowWeak: Whether `--allow-weak-passphrase` was given.
    static func check(_ passphrase: SecretBytes, what: String, allowWeak: Bool) throws {
        guard !allowWeak else { return }
        let (characters, repeated) = passphrase.withUnsafeBytes { bytes -> (Int, Bool) in
            // A UTF-8 continuation byte is 10xxxxxx; every other byte starts a character.
            let characters = bytes.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
            guard !bytes.isEmpty else { return (0, false) }
            let firstLength = bytes.dropFirst().prefix { $0 & 0xC0 == 0x80 }.count + 1
            let repeated =
                bytes.count % firstLength == 0
                && stride(from: 0, to: bytes.count, by: firstLength).allSatisfy { start in
                    (0..<firstLength).allSatisfy { bytes[start + $0] == bytes[$0] }
                }
            return (characters, repeated)
        }
        if characters < minimumCharacters {
            throw CLIError.passphraseRejected(
                "the new \(what) has \(characters) character(s); a vault passphrase needs at least \(minimumCharacters). "
                    + "Choose a longer one (several words work well), or give --allow-weak-passphrase.")
        }
        if repeated {
            throw CLIError.passphraseRejected(
                "the new \(what) is one character repeated. Choose another, or give --allow-weak-passphrase.")
        }
    }
}

import Foundation
import SystemPackage

/// The stores a profile can keep its credentials in.
public enum Backend: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The freedesktop Secret Service (gnome-keyring, KeePassXC), through libsecret.
    case secretService = "secret-service"
    /// The encrypted file vault.
    case file

    /// `secret-service` or `file`.
    public var description: String { rawValue }
}

/// Which store each profile uses, recorded the first time a store is chosen so later runs never
/// silently switch to another (empty) store. Not secret: a small JSON file, mode 0600, at
/// `$XDG_CONFIG_HOME/lockbox/settings.json` (`~/.config/lockbox/settings.json`).
public struct BackendSettings: Codable, Sendable, Equatable {
    /// One profile's recorded choice.
    public struct Profile: Codable, Sendable, Equatable {
        /// The store this profile uses.
        public var backend: Backend
        /// When the choice was recorded.
        public var recorded: Date
        /// Why: `chosen automatically: …` or `requested explicitly`.
        public var reason: String
    }

    /// Recorded choices by profile name.
    public var profiles: [String: Profile] = [:]

    /// Creates empty settings.
    public init() {}

    /// The settings file's default location for a user, from the XDG variables in `environment`
    /// (which the program passes: Lockbox reads no environment variable itself).
    public static func defaultPath(environment: [String: String]) -> FilePath {
        let configHome: FilePath
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            configHome = FilePath(xdg)
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? FileManager.default.homeDirectoryForCurrentUser.path
            configHome = FilePath(home).appending(".config")
        }
        return configHome.appending("lockbox/settings.json")
    }

    /// Reads the settings at `path`; a missing file gives empty settings.
    public static func load(from path: FilePath) throws -> BackendSettings {
        guard let data = FileManager.default.contents(atPath: path.string) else { return BackendSettings() }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom { decoder in
                let text = try decoder.singleValueContainer().decode(String.self)
                if let date = (try? Date(text, strategy: fractionalISO8601)) ?? (try? Date(text, strategy: Date.ISO8601FormatStyle())) {
                    return wholeMilliseconds(date)
                }
                throw DecodingError.dataCorruptedError(in: try decoder.singleValueContainer(), debugDescription: "not an ISO 8601 time")
            }
            return try decoder.decode(BackendSettings.self, from: data)
        } catch {
            throw LockboxError.invalidArgument(
                "the settings file \(path.string) is not valid (\(error)). Fix or remove it; it only records which store each profile uses.")
        }
    }

    /// Records `backend` for `profile` unless a choice is already recorded (re-reading the file
    /// under a lock, so two first runs at once agree); returns the profile's recorded choice.
    @discardableResult
    public static func record(
        _ backend: Backend, for profile: String, reason: String, at path: FilePath
    ) throws -> Profile {
        do {
            try path.removingLastComponent().createDirectories(permissions: .ownerReadWriteExecute)
        } catch {
            throw LockboxError.io(operation: "creating the settings folder", path: path.removingLastComponent().string, errno: error.asErrno)
        }
        return try VaultLock(vaultPath: path, timeout: .seconds(10)).withLock {
            var settings = try load(from: path)
            if let existing = settings.profiles[profile] { return existing }
            let entry = Profile(backend: backend, recorded: wholeMilliseconds(Date()), reason: reason)
            settings.profiles[profile] = entry
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            // Fractional seconds, so rewriting the file never changes another profile's time.
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(millisecondTimestamp(date))
            }
            let data = try encoder.encode(settings)
            _ = try AtomicFileWriter.write([Array(data)], to: path)
            return entry
        }
    }
}

/// ISO 8601 with fractional seconds, for reading.
private let fractionalISO8601 = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

/// The nearest whole millisecond: the settings file's precision.
private func wholeMilliseconds(_ date: Date) -> Date {
    Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
}

/// `2026-11-21T05:57:03.183Z`, with the milliseconds computed as an integer (a formatter
/// truncates, and .183 as a binary fraction sits just below it, so it would write .182).
private func millisecondTimestamp(_ date: Date) -> String {
    let total = Int64((date.timeIntervalSince1970 * 1000).rounded())
    let seconds = total >= 0 ? total / 1000 : (total - 999) / 1000
    let milliseconds = total - seconds * 1000
    let base = Date(timeIntervalSince1970: Double(seconds)).formatted(Date.ISO8601FormatStyle())  // …05Z
    let digits = String(milliseconds)
    return String(base.dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
}

import FoundationEssentials
import SystemPackage

/// The one name of a store: where items live. Each is opened through its ``StoreProvider``;
/// ``StoreRequest`` is a store or `auto`.
///
/// Called `Backend` before; "store" is the one word for where items live (docs/ARCHITECTURE.md).
/// A profile's recorded choice (``StoreSettings``) is one of the stores `auto` chooses from:
/// ``secretService`` or ``file``.
public enum StoreKind: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The freedesktop Secret Service (gnome-keyring, KeePassXC), through libsecret.
    case secretService = "secret-service"
    /// The encrypted file vault.
    case file
    /// A vault in a PostgreSQL database (the `LockboxPostgres` product).
    case postgres
    /// Process memory only (``MemoryStore``): tests.
    case memory

    /// `secret-service`, `file`, `postgres` or `memory`.
    public var description: String { rawValue }

    /// Whether `auto` can choose this store, and so whether it is recorded for a profile.
    public var isRecordable: Bool { self == .file || self == .secretService }
}

/// Which store each profile uses, recorded the first time a store is chosen so later runs never
/// silently switch to another (empty) store. Not secret: a small JSON file, mode 0600, at
/// `$XDG_CONFIG_HOME/lockbox/settings.json` (`~/.config/lockbox/settings.json`).
public struct StoreSettings: Codable, Sendable, Equatable {
    /// One profile's recorded choice.
    public struct Profile: Codable, Sendable, Equatable {
        /// The store this profile uses (`"backend"` in the file, its name before 0.5).
        public var storeKind: StoreKind
        /// When the choice was recorded.
        public var recorded: Date
        /// Why: `chosen automatically: …` or `requested explicitly`.
        public var reason: String
        /// The vault `lockbox init` made for this profile, with the key file it made or was given
        /// (absolute paths): later commands on that vault use the key file without being told.
        public var vault: String?
        /// See ``vault``.
        public var keyFile: String?

        // The file keeps the key it always had, so settings written by older versions still read.
        private enum CodingKeys: String, CodingKey {
            case storeKind = "backend"
            case recorded, reason, vault, keyFile
        }
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
            let home =
                environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? FileManager.default.homeDirectoryForCurrentUser.path
            configHome = FilePath(home).appending(".config")
        }
        return configHome.appending("lockbox/settings.json")
    }

    /// Reads the settings at `path`; a missing file gives empty settings.
    public static func load(from path: FilePath) throws -> StoreSettings {
        guard let data = FileManager.default.contents(atPath: path.string) else { return StoreSettings() }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom { decoder in
                let text = try decoder.singleValueContainer().decode(String.self)
                if let date = millisecondTimestampDate(text) { return date }
                if let date = (try? Date(text, strategy: fractionalISO8601)) ?? (try? Date(text, strategy: Date.ISO8601FormatStyle())) {
                    return wholeMilliseconds(date)
                }
                throw DecodingError.dataCorruptedError(in: try decoder.singleValueContainer(), debugDescription: "not an ISO 8601 time")
            }
            return try decoder.decode(StoreSettings.self, from: data)
        } catch {
            throw LockboxError.invalidArgument(
                "the settings file \(path.string) is not valid (\(error)). Fix or remove it; it only records which store each profile uses."
            )
        }
    }

    /// Records `storeKind` for `profile` unless a choice is already recorded (re-reading the file
    /// under a lock, so two first runs at once agree); returns the profile's recorded choice.
    @discardableResult
    public static func record(
        _ storeKind: StoreKind, for profile: String, reason: String, at path: FilePath
    ) throws -> Profile {
        try update(at: path) { settings in
            if let existing = settings.profiles[profile] { return (existing, false) }
            let entry = Profile(storeKind: storeKind, recorded: wholeMilliseconds(Date()), reason: reason)
            settings.profiles[profile] = entry
            return (entry, true)
        }
    }

    /// Records that `profile`'s file vault at `vault` opens with the key file at `keyFile` (both
    /// made absolute), keeping the profile's store choice (recording the file vault if it has
    /// none).
    public static func rememberKeyFile(_ keyFile: FilePath, vault: FilePath, for profile: String, at path: FilePath) throws {
        func absolute(_ file: FilePath) -> String {
            file.isAbsolute ? file.string : FilePath(FileManager.default.currentDirectoryPath).pushing(file).string
        }
        try update(at: path) { settings in
            var entry =
                settings.profiles[profile]
                ?? Profile(storeKind: .file, recorded: wholeMilliseconds(Date()), reason: "a file vault was created with `lockbox init`")
            (entry.vault, entry.keyFile) = (absolute(vault), absolute(keyFile))
            settings.profiles[profile] = entry
            return ((), true)
        }
    }

    /// Reads the settings at `path` under their lock, lets `change` edit them, and writes them
    /// back atomically when it says it changed them.
    @discardableResult
    private static func update<T>(at path: FilePath, _ change: (inout StoreSettings) throws -> (T, changed: Bool)) throws -> T {
        do {
            try path.removingLastComponent().createDirectories(permissions: .ownerReadWriteExecute)
        } catch {
            throw LockboxError.io(
                operation: "creating the settings folder", path: path.removingLastComponent().string, errno: error.asErrno)
        }
        return try VaultLock(vaultPath: path, timeout: .seconds(10)).withLock {
            var settings = try load(from: path)
            let (result, changed) = try change(&settings)
            guard changed else { return result }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            // Fractional seconds, so rewriting the file never changes another profile's time.
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(millisecondTimestamp(date))
            }
            let data = try encoder.encode(settings)
            _ = try AtomicFileWriter.write([Array(data)], to: path)
            return result
        }
    }
}

/// ISO 8601 with fractional seconds, for reading.
private let fractionalISO8601 = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

/// The nearest whole millisecond: the settings file's precision.
private func wholeMilliseconds(_ date: Date) -> Date {
    Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
}

/// The time of a `2026-11-21T05:57:03.183Z` that ``millisecondTimestamp(_:)`` wrote, read without
/// a date formatter (a large share of the start-up of every command that reads the settings);
/// `nil` for any other text, which the ISO 8601 formatters then read as before. The
/// value is exactly what those formatters and ``wholeMilliseconds(_:)`` give for this text.
func millisecondTimestampDate(_ text: String) -> Date? {
    var utf8 = text.utf8.makeIterator()
    var digits: [Int] = []
    digits.reserveCapacity(17)
    // YYYY-MM-DDTHH:MM:SS.mmmZ: the separators at their positions, digits everywhere else (a
    // switch, not a dictionary: building one costs more than the whole parse).
    func separator(at position: Int) -> UInt8? {
        switch position {
        case 4, 7: UInt8(ascii: "-")
        case 10: UInt8(ascii: "T")
        case 13, 16: UInt8(ascii: ":")
        case 19: UInt8(ascii: ".")
        case 23: UInt8(ascii: "Z")
        default: nil
        }
    }
    for position in 0..<24 {
        guard let byte = utf8.next() else { return nil }
        if let separator = separator(at: position) {
            guard byte == separator else { return nil }
        } else {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            digits.append(Int(byte - UInt8(ascii: "0")))
        }
    }
    guard utf8.next() == nil else { return nil }
    func number(_ range: Range<Int>) -> Int { digits[range].reduce(0) { $0 * 10 + $1 } }
    let year = number(0..<4)
    let month = number(4..<6)
    let day = number(6..<8)
    let hour = number(8..<10)
    let minute = number(10..<12)
    let second = number(12..<14)
    let millisecond = number(14..<17)
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    guard year >= 1970, (1...12).contains(month), (1...monthDays[month - 1]).contains(day), hour < 24, minute < 60, second < 60
    else { return nil }
    // Days since 1970-01-01 (proleptic Gregorian, as ISO 8601 counts).
    let shiftedYear = month <= 2 ? year - 1 : year
    let era = shiftedYear / 400
    let yearOfEra = shiftedYear - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = era * 146_097 + dayOfEra - 719_468
    let total = Int64(((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + Int64(millisecond)
    return Date(timeIntervalSince1970: Double(total) / 1000)
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

/// The old name of ``StoreKind``.
@available(*, deprecated, renamed: "StoreKind")
public typealias Backend = StoreKind

/// The old name of ``StoreSettings``.
@available(*, deprecated, renamed: "StoreSettings")
public typealias BackendSettings = StoreSettings

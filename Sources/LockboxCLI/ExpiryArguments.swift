import ArgumentParser
import FoundationEssentials
import Lockbox

/// The CLI's durations and dates: `30s`, `15m`, `12h`, `7d`, `2w`, combined (`1h30m`) or bare
/// seconds (`90`); dates in ISO 8601 (`2026-12-31`, midnight UTC, or `2026-12-31T18:00:00Z`).
/// Anything else — a sign, `nan`, `inf`, an exponent, an empty or zero duration, more than 100
/// years — is refused with a message saying what is accepted.
enum ExpiryArguments {
    /// The longest duration taken: 100 years.
    static let maximumSeconds: Double = 100 * 365.25 * 86400

    /// A positive duration.
    static func duration(_ text: String, option: String) throws -> Duration {
        guard let seconds = seconds(text) else {
            throw ValidationError(
                "\(option) takes a positive duration such as 30s, 15m, 12h, 7d, 2w or 1h30m (at most 100 years), not '\(text)'")
        }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// A moment after now: now plus a duration, or a date.
    static func expiry(_ text: String, now: Date = Date()) throws -> Date {
        if let seconds = seconds(text) { return now.addingTimeInterval(seconds) }
        guard let date = date(text) else {
            throw ValidationError(
                "--expires takes a duration (30s, 15m, 12h, 7d, 2w, 1h30m) or a date (2026-12-31 or 2026-12-31T18:00:00Z), not '\(text)'")
        }
        guard date > now else { throw ValidationError("--expires \(text) has already passed") }
        guard date.timeIntervalSince(now) <= maximumSeconds else { throw ValidationError("--expires \(text) is more than 100 years away") }
        return date
    }

    /// The seconds a duration stands for, or `nil` if `text` is not one.
    static func seconds(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400]
        var total = 0.0
        var number = ""
        var sawUnit = false
        for character in text {
            if character.isASCII, character.isNumber || character == "." {
                number.append(character)
            } else if let unit = units[character] {
                guard !number.isEmpty, number.count <= 15, let value = Double(number) else { return nil }
                total += value * unit
                number = ""
                sawUnit = true
            } else {
                return nil
            }
        }
        if !number.isEmpty {
            // Bare seconds, only on their own (`90`, not `1h30`).
            guard !sawUnit, number.count <= 15, let value = Double(number) else { return nil }
            total = value
        } else if !sawUnit {
            return nil
        }
        guard total.isFinite, total > 0, total <= maximumSeconds else { return nil }
        return total
    }

    /// The moment an ISO 8601 date or date-time names, or `nil`.
    static func date(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle()) { return date }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return date }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle().year().month().day()) { return date }
        return nil
    }
}

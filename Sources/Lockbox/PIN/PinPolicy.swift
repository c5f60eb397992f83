/// What a PIN must look like. Checked when a PIN is set or changed, never when one is verified.
///
/// The default accepts 4–12 digits and rejects what people pick most and attackers guess
/// first: one repeated digit, ascending or descending runs, and a blocklist of about a tenth of
/// the 4- and 6-digit spaces (see ``PinBlocklist``).
public struct PinPolicy: Sendable, Hashable, Codable {
    /// Shortest PIN accepted.
    public var minimumLength: Int
    /// Longest PIN accepted.
    public var maximumLength: Int
    /// Whether letters (and other characters) may be used, making it a passcode.
    public var allowsNonDigits: Bool
    /// Whether the blocklist and the repeated-digit and run rules apply.
    public var rejectsCommonPins: Bool

    /// Creates a policy.
    public init(minimumLength: Int = 4, maximumLength: Int = 12, allowsNonDigits: Bool = false, rejectsCommonPins: Bool = true) {
        self.minimumLength = minimumLength
        self.maximumLength = maximumLength
        self.allowsNonDigits = allowsNonDigits
        self.rejectsCommonPins = rejectsCommonPins
    }

    /// 4–12 digits, common PINs rejected.
    public static let `default` = PinPolicy()

    /// Throws ``LockboxError/pinRejected(rule:)`` naming the first rule `pin` breaks.
    ///
    /// The PIN is read in place, in its guarded memory: no array, set or string is built from it.
    public func check(_ pin: SecretBytes) throws {
        if let rule = pin.withUnsafeBytes({ brokenRule($0) }) { throw LockboxError.pinRejected(rule: rule) }
    }

    /// The first rule `characters` breaks, or `nil`.
    private func brokenRule(_ characters: UnsafeRawBufferPointer) -> String? {
        guard characters.count >= minimumLength else { return "a PIN needs at least \(minimumLength) characters" }
        guard characters.count <= maximumLength else { return "a PIN may have at most \(maximumLength) characters" }
        let allDigits = characters.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        if !allowsNonDigits && !allDigits { return "a PIN may contain only the digits 0-9" }
        if allowsNonDigits && characters.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
            return "a passcode may not contain control characters"
        }
        guard rejectsCommonPins, let first = characters.first else { return nil }
        if characters.allSatisfy({ $0 == first }) { return "a PIN made of one repeated character is guessed first" }
        if allDigits {
            let digit = { (index: Int) in Int(characters[index] - UInt8(ascii: "0")) }
            if PinBlocklist.isRun(count: characters.count, digit) {
                return "an ascending or descending run of digits is guessed first"
            }
            if PinBlocklist.contains(count: characters.count, digit) {
                return "this PIN is on the blocklist of the most common PINs; choose a less predictable one"
            }
        }
        return nil
    }
}

/// The most guessable 4- and 6-digit PINs: about 10% of each space, the size Markert et al.
/// found to help most without frustrating users ("This PIN Can Be Easily Guessed: Analyzing the
/// Security of Smartphone Unlock PINs", IEEE S&P 2020).
///
/// The published lists are data sets we could not ship here, so the blocklist is built from the
/// choices those studies — and Bonneau, Preibusch and Anderson ("A birthday present every
/// eleven wallets? The security of customer-chosen banking PINs", FC 2012), Wang et al.
/// ("Understanding Human-Chosen PINs", ASIACCS 2017) and Nick Berry's DataGenetics analysis of
/// 3.4 million 4-digit PINs (2012, whose top 20 cover 26.8% of choices) — found most common:
/// - the top-20 4-digit PINs of the DataGenetics analysis, listed below;
/// - one digit repeated, ascending and descending runs (also with wrap-around, e.g. 7890);
/// - repeated pairs and mirrored patterns: ABAB, AABB, ABBA (4 digits); ABABAB, AABBCC, ABCABC,
///   ABCCBA (6 digits);
/// - straight lines and crosses on the phone keypad (2580, 1470, 3690, 1379, 2468, …);
/// - years 1940–2029 (4 digits), and dates: MMDD and DDMM (4 digits), DDMMYY, MMDDYY, YYMMDD
///   (6 digits).
/// ``fraction(length:)`` reports the share of the space blocked (the tests keep it near 10%).
public enum PinBlocklist {
    /// DataGenetics' 20 most common 4-digit PINs, most common first.
    public static let dataGeneticsTop20 = [
        "1234", "1111", "0000", "1212", "7777", "1004", "2000", "4444", "2222", "6969",
        "9999", "3333", "5555", "6666", "1122", "1313", "8888", "4321", "2001", "1010",
    ]

    /// Keypad shapes: columns, rows, diagonals and corners, read both ways.
    static let keypadShapes: Set<String> = {
        let base = [
            "2580", "1470", "3690", "1379", "2468", "1357", "1590", "3570", "1478", "3698",
            "1236", "7894", "1254", "1456", "4789", "2587", "0258", "8520",
        ]
        return Set(base + base.map { String($0.reversed()) })
    }()

    /// The top 20 and the keypad shapes as 4-digit numbers, so a PIN is compared as a number
    /// on the stack, never turned into a string.
    private static let listedFourDigitValues: Set<Int> = Set((dataGeneticsTop20 + keypadShapes).compactMap { Int($0) })

    /// Whether `count` digits (`digit(i)` for each position) go up or down by one each step
    /// (wrapping 9→0 and 0→9).
    static func isRun(count: Int, _ digit: (Int) -> Int) -> Bool {
        guard count >= 3 else { return false }
        var up = true
        var down = true
        for index in 1..<count {
            let step = (digit(index) - digit(index - 1) + 10) % 10
            up = up && step == 1
            down = down && step == 9
        }
        return up || down
    }

    /// Whether a PIN of digits is on the blocklist (4- and 6-digit PINs; other lengths only by
    /// the repeated and run rules in ``PinPolicy``).
    public static func contains(_ digits: [Int]) -> Bool {
        contains(count: digits.count) { digits[$0] }
    }

    /// ``contains(_:)`` over `count` digits read through `digit`, so a caller can check a PIN
    /// in place without copying it into an array.
    static func contains(count: Int, _ digit: (Int) -> Int) -> Bool {
        guard count > 0 else { return false }
        if isRun(count: count, digit) || (1..<count).allSatisfy({ digit($0) == digit(0) }) { return true }
        switch count {
        case 4:
            let (a, b, c, d) = (digit(0), digit(1), digit(2), digit(3))
            if listedFourDigitValues.contains(a * 1000 + b * 100 + c * 10 + d) { return true }
            if (a == c && b == d) || (a == b && c == d) || (a == d && b == c) { return true }
            let year = a * 1000 + b * 100 + c * 10 + d
            if (1940...2029).contains(year) { return true }
            let first = a * 10 + b
            let second = c * 10 + d
            return isDayOfMonth(day: second, month: first) || isDayOfMonth(day: first, month: second)
        case 6:
            let (a, b, c, d, e, f) = (digit(0), digit(1), digit(2), digit(3), digit(4), digit(5))
            if a == c && c == e && b == d && d == f { return true }  // ABABAB
            if a == b && c == d && e == f { return true }  // AABBCC
            if a == d && b == e && c == f { return true }  // ABCABC
            if a == f && b == e && c == d { return true }  // ABCCBA
            let p1 = a * 10 + b
            let p2 = c * 10 + d
            let p3 = e * 10 + f
            return isDayOfMonth(day: p1, month: p2) || isDayOfMonth(day: p2, month: p1)
                || isDayOfMonth(day: p3, month: p2)
        default:
            return false
        }
    }

    /// The share of all PINs of `length` digits that the blocklist (with the repeat and run
    /// rules) rejects.
    public static func fraction(length: Int) -> Double {
        let total = Int(pow10(length))
        var blocked = 0
        for value in 0..<total where contains(digitsOf(value, length: length)) { blocked += 1 }
        return Double(blocked) / Double(total)
    }

    static func digitsOf(_ value: Int, length: Int) -> [Int] {
        var digits = [Int](repeating: 0, count: length)
        var rest = value
        for index in stride(from: length - 1, through: 0, by: -1) {
            digits[index] = rest % 10
            rest /= 10
        }
        return digits
    }

    private static func pow10(_ exponent: Int) -> Double {
        (0..<exponent).reduce(1.0) { value, _ in value * 10 }
    }

    private static func isDayOfMonth(day: Int, month: Int) -> Bool {
        let lengths = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month) else { return false }
        return (1...lengths[month - 1]).contains(day)
    }
}

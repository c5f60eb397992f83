import FoundationEssentials
import Lockbox

/// A JSON value, decoded exactly: integers stay integers (no trip through `Double`), so a vector
/// file's 64-bit values are read as written.
enum VectorJSON: Decodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([VectorJSON])
    case object([String: VectorJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([VectorJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: VectorJSON].self))
        }
    }

    static func parse(_ data: Data) throws -> VectorJSON {
        do {
            return try JSONDecoder().decode(VectorJSON.self, from: data)
        } catch {
            throw VectorError("not valid JSON (\(error))")
        }
    }
}

/// Why a vector file or vector could not be used or did not match.
struct VectorError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The fields of one JSON object, read strictly: a missing, mistyped or unknown field is an
/// error, so a damaged key name in a vector file fails instead of being skipped silently.
struct VectorFields {
    private let values: [String: VectorJSON]
    private let context: String
    private var used: Set<String> = []

    init(_ value: VectorJSON, context: String) throws {
        guard case .object(let values) = value else { throw VectorError("\(context): expected a JSON object") }
        self.values = values
        self.context = context
    }

    var keys: Set<String> { Set(values.keys) }

    func has(_ key: String) -> Bool { values[key] != nil }

    /// Fails if the object has fields that were never read.
    func finish() throws {
        let unknown = Set(values.keys).subtracting(used).sorted()
        guard unknown.isEmpty else {
            throw VectorError("\(context): unknown field(s) \(unknown.joined(separator: ", "))")
        }
    }

    /// Marks fields as read without using them (descriptions, sources).
    mutating func ignore(_ keys: String...) {
        for key in keys { used.insert(key) }
    }

    mutating func ignore(contentsOf keys: Set<String>) {
        for key in keys { used.insert(key) }
    }

    mutating func value(_ key: String) throws -> VectorJSON {
        used.insert(key)
        guard let value = values[key] else { throw VectorError("\(context): missing field \(key)") }
        return value
    }

    mutating func string(_ key: String) throws -> String {
        guard case .string(let string) = try value(key) else { throw VectorError("\(context): \(key) must be a string") }
        return string
    }

    mutating func optionalString(_ key: String) throws -> String? {
        has(key) ? try string(key) : nil
    }

    mutating func integer(_ key: String) throws -> Int64 {
        guard case .integer(let number) = try value(key) else { throw VectorError("\(context): \(key) must be an integer") }
        return number
    }

    mutating func optionalInteger(_ key: String) throws -> Int64? {
        has(key) ? try integer(key) : nil
    }

    mutating func bool(_ key: String) throws -> Bool {
        guard case .bool(let flag) = try value(key) else { throw VectorError("\(context): \(key) must be true or false") }
        return flag
    }

    mutating func hex(_ key: String) throws -> [UInt8] {
        let text = try string(key)
        guard let bytes = VectorFields.decodeHex(text) else {
            throw VectorError("\(context): \(key) is not lowercase hexadecimal with an even number of digits")
        }
        return bytes
    }

    mutating func optionalHex(_ key: String) throws -> [UInt8]? {
        has(key) ? try hex(key) : nil
    }

    mutating func array(_ key: String) throws -> [VectorJSON] {
        guard case .array(let items) = try value(key) else { throw VectorError("\(context): \(key) must be an array") }
        return items
    }

    mutating func object(_ key: String) throws -> VectorFields {
        try VectorFields(try value(key), context: "\(context).\(key)")
    }

    mutating func stringMap(_ key: String) throws -> [String: String] {
        guard case .object(let entries) = try value(key) else { throw VectorError("\(context): \(key) must be an object") }
        var map: [String: String] = [:]
        for (name, value) in entries {
            guard case .string(let string) = value else { throw VectorError("\(context): \(key).\(name) must be a string") }
            map[name] = string
        }
        return map
    }

    /// Lowercase hex only, as the vector files are written, so `A` and `a` are not both accepted.
    static func decodeHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hex, two digits per byte.
    var vectorHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

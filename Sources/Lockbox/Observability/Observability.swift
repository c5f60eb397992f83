import CoreMetrics
import Dispatch
import FoundationEssentials
import Logging

extension Logger {
    /// The logger Lockbox's types use when given none: labelled `lockbox`, and silent. Pass your
    /// own (`Logger(label: "lockbox")` after `LoggingSystem.bootstrap`) to see Lockbox's records.
    public static let lockboxDefault = Logger(label: "lockbox", factory: { _ in SwiftLogNoOpLogHandler() })
}

/// The metadata keys of Lockbox's log records. Values are store type names, operations, item
/// addresses (service and account), counts, outcomes and error codes — never a secret, a PIN, a
/// token or a hash.
enum LogKey {
    static let store = "lockbox.store"
    static let operation = "lockbox.operation"
    static let service = "lockbox.service"
    static let account = "lockbox.account"
    static let profile = "lockbox.pin-profile"
    static let failures = "lockbox.failures"
    static let outcome = "lockbox.outcome"
    static let errorCode = "lockbox.error-code"
}

/// What a caught error may say in a log record: a ``LockboxError``'s stable code, or only the
/// type of any other error (whose description Lockbox does not control: a refresh callback's
/// error could quote a server response with a token in it).
func loggableError(_ error: any Error) -> Logger.MetadataValue {
    if let error = error as? LockboxError { return .string(error.code.rawValue) }
    return .string("\(type(of: error))")
}

/// The metrics Lockbox records, created once per instrumented object. Labels (all prefixed
/// `lockbox_`) and dimensions are listed in docs/PERFORMANCE.md ("Metrics").
final class LockboxMetrics: Sendable {
    let factory: any MetricsFactory
    private let timers = Locked<[String: CoreMetrics.Timer]>([:])
    private let counters = Locked<[String: Counter]>([:])

    init(factory: any MetricsFactory) { self.factory = factory }

    /// The counter `label` with `dimensions`, created on first use.
    func counter(_ label: String, _ dimensions: [(String, String)] = []) -> Counter {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        return counters.withLock { counters in
            if let existing = counters[key] { return existing }
            let created = Counter(label: label, dimensions: dimensions, factory: factory)
            counters[key] = created
            return created
        }
    }

    /// The timer `label` with `dimensions`, created on first use.
    func timer(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Timer {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        return timers.withLock { timers in
            if let existing = timers[key] { return existing }
            let created = CoreMetrics.Timer(label: label, dimensions: dimensions, factory: factory)
            timers[key] = created
            return created
        }
    }

    /// One store call through `body`, timed as `lockbox_store_call_duration{store, operation}`.
    func storeCall<T>(_ store: String, _ operation: String, _ body: () async throws -> T) async rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer {
            timer("lockbox_store_call_duration", [("store", store), ("operation", operation)])
                .recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
        }
        return try await body()
    }
}

#if !PostgreSQL
    import Foundation
    import Testing

    /// Built without the package's `PostgreSQL` trait, this test target has none of the PostgreSQL
    /// store's tests: this one says so, and fails where they are required
    /// (LOCKBOX_REQUIRE_POSTGRES_TESTS=1, as scripts/test.sh sets; it builds with the trait).
    @Test func postgreSQLTraitIsEnabledWhereRequired() {
        let note = "LockboxPostgresTests: built without the PostgreSQL trait (swift build --build-tests --traits PostgreSQL)"
        if ProcessInfo.processInfo.environment["LOCKBOX_REQUIRE_POSTGRES_TESTS"] == "1" {
            Issue.record("LOCKBOX_REQUIRE_POSTGRES_TESTS=1 requires the PostgreSQL tests: \(note)")
        } else {
            FileHandle.standardError.write(Data("NOT TESTED: \(note)\n".utf8))
        }
    }
#endif

#if !SwiftConfiguration
    import Foundation
    import Testing

    /// Built without the package's `SwiftConfiguration` trait, this test target has none of the
    /// adapter's tests: this one says so, and fails where they are required
    /// (LOCKBOX_REQUIRE_CONFIGURATION_TESTS=1, as scripts/test.sh sets; it builds with the trait).
    @Test func swiftConfigurationTraitIsEnabledWhereRequired() {
        let note =
            "LockboxSwiftConfigurationTests: built without the SwiftConfiguration trait (swift build --build-tests --traits SwiftConfiguration)"
        if ProcessInfo.processInfo.environment["LOCKBOX_REQUIRE_CONFIGURATION_TESTS"] == "1" {
            Issue.record("LOCKBOX_REQUIRE_CONFIGURATION_TESTS=1 requires the swift-configuration adapter's tests: \(note)")
        } else {
            FileHandle.standardError.write(Data("NOT TESTED: \(note)\n".utf8))
        }
    }
#endif

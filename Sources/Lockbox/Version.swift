/// The version of Lockbox: the library and the `lockbox` command (`lockbox --version`) are one.
///
/// The one place the version is written. A release tags the repository with it (the tag is the
/// version SwiftPM resolves, `.package(url: …, from: "0.2.0")`), CHANGELOG.md's newest section is
/// headed with it, and the README's manifest line asks for it (scripts/ci/check-samples.sh and
/// CLITests check both).
public enum LockboxVersion {
    /// The version, `MAJOR.MINOR.PATCH` (Semantic Versioning; before 1.0 a minor version may
    /// break source, CHANGELOG.md says how).
    public static let current = "0.2.0"
}

/// The release of Lockbox this code is: the library and the `lockbox` command
/// (`lockbox --version`) are one.
///
/// The one place the version is written. A release tags the repository with it (the tag is the
/// version SwiftPM resolves, `.package(url: …, from: "0.2.0")`), CHANGELOG.md's newest section is
/// headed with it, and the README's manifest line asks for it (scripts/ci/check-samples.sh and
/// CLITests check both).
///
/// Not named `LockboxVersion`: the symbol-graph tools leave out every type whose name is the
/// module's followed by `Version` (taking it for a framework's generated version symbol), so DocC
/// would not show it (scripts/ci/check-docs.sh refuses such names).
public enum LockboxRelease {
    /// The version, `MAJOR.MINOR.PATCH` (Semantic Versioning; before 1.0 a minor version may
    /// break source, CHANGELOG.md says how).
    public static let version = "0.2.0"
}

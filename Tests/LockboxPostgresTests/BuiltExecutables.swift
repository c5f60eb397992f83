import Foundation

/// The executable `name` the build put beside the test product (`swift build --build-tests`, in
/// whichever configuration: the test command's or a debug build's), or, when it is not found
/// there, `.build/debug/name` under the working directory.
func builtExecutable(_ name: String) -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL,
        Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for folder in candidates {
        let url = folder.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/" + name)
}

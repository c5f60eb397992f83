import Foundation

/// Set by scripts/dev/keyring-session.sh: `unlocked` when a real gnome-keyring-daemon with an
/// unlocked default collection is on this process's session bus.
let keyringMode = ProcessInfo.processInfo.environment["LOCKBOX_TEST_KEYRING"]
let keyringAvailable = keyringMode == "unlocked"

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
let keyringSessionScript = repositoryRoot.appendingPathComponent("scripts/dev/keyring-session.sh").path

/// The parts of this process's environment a child needs to reach the same keyring.
var keyringEnvironment: [String: String] {
    let environment = ProcessInfo.processInfo.environment
    var result: [String: String] = [:]
    for name in ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"] {
        if let value = environment[name] { result[name] = value }
    }
    return result
}

/// Runs a program, feeding `stdin`; returns status, stdout, stderr and how long it took.
func run(_ executable: String, _ arguments: [String], stdin: String = "", environment: [String: String]? = nil)
    throws -> (status: Int32, stdout: String, stderr: String, seconds: Double)
{
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let start = Date()
    let result = try runProcess(process, stdin: Data(stdin.utf8))
    return (result.status, result.stdoutString, result.stderr, Date().timeIntervalSince(start))
}

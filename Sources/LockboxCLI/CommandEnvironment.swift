import FoundationEssentials

/// The process's environment, read once: `ProcessInfo.processInfo.environment` builds a new
/// dictionary from every variable on each use, and a single command asks for it several times.
/// None of the variables `lockbox` reads is changed by `lockbox` itself (it sets only `TSS2_LOG`,
/// for the TPM library), so one copy serves the run.
enum CommandEnvironment {
    static let values = ProcessInfo.processInfo.environment
}

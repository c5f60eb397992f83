/// The one confirmation rule of commands that remove or replace credentials (`wipe`, `signout`,
/// `slot remove`, `device-id --reset`, `import --on-conflict overwrite`): with `--yes`, go on; on
/// a terminal, ask; without one, refuse (exit 13, `not-confirmed`) and change nothing.
enum Confirmation {
    /// Returns when the change may go ahead: `yes` was given, or the question was answered yes on
    /// the terminal. Throws ``CLIError/notConfirmed(_:)`` otherwise, naming what was not done.
    ///
    /// - Parameters:
    ///   - yes: Whether `--yes` was given.
    ///   - question: The question for the terminal, e.g. "Remove 3 item(s) of service 'api'?".
    ///   - what: What would have been done, for the refusal, e.g. "wipe service 'api'".
    static func require(yes: Bool, question: @autoclosure () throws -> String, what: String) throws {
        guard !yes else { return }
        guard let answer = Terminal.confirm(try question()) else {
            throw CLIError.notConfirmed("refusing to \(what) without confirmation: there is no terminal to ask on. Pass --yes.")
        }
        guard answer else { throw CLIError.notConfirmed("nothing was changed") }
    }

    /// The help of every command's `--yes`.
    static let yesHelp = "Do not ask for confirmation (required without a terminal)."
}

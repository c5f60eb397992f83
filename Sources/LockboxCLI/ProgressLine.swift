import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// The progress of long work (import, export, migrate, convert, rotate-key) as one line on a terminal, redrawn at most
/// ten times a second: items done (of how many, when known), the rate and the time left. On a
/// pipe or file there is none (``init(label:terminal:)`` returns `nil`); the command prints its
/// summary either way. A small printer of our own: the line is one `\r`-rewritten string, and
/// none of the terminal packages for Swift that fit the build (no Foundation on Linux) offers
/// throttling that this does not in a few lines.
final class ProgressLine {
    /// The least time between two redraws.
    static let interval: Duration = .milliseconds(100)

    private let label: String
    private let clock = ContinuousClock()
    private var lastDraw: ContinuousClock.Instant
    /// The first report: the rate and the time left are measured from it, not from the start, so
    /// preparation before the first item (reading, opening) does not make them look slow.
    private var first: (instant: ContinuousClock.Instant, done: Int, share: Double)?
    private var drawn = false
    /// How many times the line was drawn (tests, traces).
    private(set) var draws = 0

    /// A progress line for `label` ("importing"), or `nil` when standard error is not a terminal.
    ///
    /// - Parameters:
    ///   - label: What is being done, at the start of the line.
    ///   - terminal: Whether to draw; by default, whether standard error is a terminal.
    init?(label: String, terminal: Bool = isatty(STDERR_FILENO) == 1) {
        guard terminal else { return nil }
        self.label = label
        // The first draw comes after one interval: work that ends sooner shows no line at all.
        lastDraw = clock.now
    }

    /// Reports `done` items of `total` (if known); `fraction` (0 to 1) is the share of the work
    /// done when the item count is not known ahead (bytes of the input read), for the time left.
    /// Draws only when ``interval`` has passed since the last draw.
    func update(done: Int, total: Int? = nil, fraction: Double? = nil) {
        let now = clock.now
        let share = total.map { $0 > 0 ? Double(done) / Double($0) : 1 } ?? fraction
        let first = self.first ?? (now, done, share ?? 0)
        self.first = first
        guard now - lastDraw >= Self.interval else { return }
        lastDraw = now
        let elapsed = Double((now - first.instant) / .milliseconds(1)) / 1000
        var text = "\r\(label) \(Self.grouped(done))" + (total.map { "/\(Self.grouped($0))" } ?? "") + " items"
        if elapsed > 0 && done > first.done {
            let rate = Double(done - first.done) / elapsed
            text += ", \(Self.grouped(Int(rate.rounded())))/s"
            if let share, share > first.share, share < 1 {
                text += ", about \(Self.duration(elapsed * (1 - share) / (share - first.share))) left"
            }
        }
        Console.write(text + "\u{1B}[K")
        drawn = true
        draws += 1
    }

    /// Clears the line (the summary that follows takes its place); once.
    func finish() {
        if drawn { Console.write("\r\u{1B}[K") }
        drawn = false
    }

    /// `12345` as `12,345`.
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result += "," }
            result.append(digit)
        }
        return (value < 0 ? "-" : "") + result
    }

    /// `75.4` seconds as `1 min 15 s`.
    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        if whole < 60 { return "\(whole) s" }
        if whole < 3600 { return "\(whole / 60) min \(whole % 60) s" }
        return "\(whole / 3600) h \(whole % 3600 / 60) min"
    }
}

/// The progress of work done in steps, each a pass over the items (`convert`: writing, then
/// checking): one ``ProgressLine`` per step, labelled by the step, with its own rate and time left.
/// A step's line is cleared when the next begins; the throttle holds across steps, since a new
/// line draws first one interval after it begins. `nil` when standard error is not a terminal.
final class SteppedProgress<Step: Equatable> {
    private let label: (Step) -> String
    private var current: (step: Step, line: ProgressLine)?
    /// How many times the lines were drawn, all steps together (tests, traces).
    var draws: Int { finishedDraws + (current?.line.draws ?? 0) }
    private var finishedDraws = 0

    /// Steps labelled by `label` ("converting", "checking"), or `nil` when standard error is not
    /// a terminal.
    ///
    /// - Parameters:
    ///   - terminal: Whether to draw; by default, whether standard error is a terminal.
    ///   - label: The label of each step's line.
    init?(terminal: Bool = isatty(STDERR_FILENO) == 1, label: @escaping (Step) -> String) {
        guard terminal else { return nil }
        self.label = label
    }

    /// Reports `done` items of `total` in `step`; a new step replaces the line of the one before.
    func update(_ step: Step, done: Int, total: Int) {
        if current?.step != step {
            finish()
            guard let line = ProgressLine(label: label(step), terminal: true) else { return }
            current = (step, line)
        }
        current?.line.update(done: done, total: total)
    }

    /// Clears the current step's line (the summary that follows takes its place).
    func finish() {
        guard let current else { return }
        current.line.finish()
        finishedDraws += current.line.draws
        self.current = nil
    }
}

import Foundation
import Testing

@testable import LockboxTestSupport

@Suite("The tests' process runner")
struct ProcessRunnerTests {
    @Test("a child that fills standard error before reading a large standard input does not deadlock the runner")
    func noPipeDeadlock() throws {
        // 1 MiB each way, far more than a pipe holds (64 KiB): a runner that wrote all the input
        // before reading the error output (as the old ones did) waits forever here.
        let input = String(repeating: "x", count: 1 << 20)
        let result = try run("/bin/sh", ["-c", "head -c 1048576 /dev/zero | tr '\\0' e >&2; wc -c; echo done"], stdin: input)
        #expect(result.status == 0)
        #expect(result.stderr.count == 1 << 20)
        #expect(result.stdout.contains("1048576") && result.stdout.hasSuffix("done\n"))
    }
}

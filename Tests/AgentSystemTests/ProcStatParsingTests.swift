import AgentSystem
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ProcStat`'s parser on hostile command names and short lines, and `read` and the walk
/// over a `/proc` laid out in a temporary directory.
struct ProcStatParsingTests {
    func stat(_ line: String) -> ProcStat? { ProcStat(statLine: Array(line.utf8)) }

    @Test func aNameThatLooksLikeFieldsIsSkipped() throws {
        let parsed = try #require(stat("7 (evil) S 99 99 99) R 3 7 8 0 -1 4194560"))
        #expect(parsed.state == UInt8(ascii: "R"))
        #expect(parsed.parent == 3 && parsed.group == 7 && parsed.session == 8)
        #expect(!parsed.isDead)
        let initProcess = try #require(stat("1 (systemd) S 0 1 1 0 -1"))
        #expect(initProcess.parent == 0 && initProcess.group == 1 && initProcess.session == 1)
    }

    @Test func deadStatesAndRefusals() {
        #expect(stat("5 (z) Z 1 5 5 0")?.isDead == true)
        #expect(stat("5 (x) X 1 5 5 0")?.isDead == true)
        #expect(stat("5 (d) D 1 5 5 0")?.isDead == false)
        #expect(stat("") == nil)
        #expect(stat("5 x S 1 5 5") == nil, "no command name")
        #expect(stat("5 (x) S 1 5") == nil, "too few fields")
        #expect(stat("5 (x) S 1 5 y 0") == nil, "a session that is not a number")
        #expect(stat("5 (x)") == nil)
    }

    @Test func readAndWalkAFakeProc() throws {
        let root = NSTemporaryDirectory() + "procstat-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (pid, line) in [(11, "11 (a) S 1 11 11 0\n"), (12, "12 (b b) Z 11 11 11 0\n"), (13, "13 (c) R 11 13 11 0\n")] {
            try FileManager.default.createDirectory(atPath: "\(root)/\(pid)", withIntermediateDirectories: true)
            try Data(line.utf8).write(to: URL(fileURLWithPath: "\(root)/\(pid)/stat"))
        }
        try FileManager.default.createDirectory(atPath: "\(root)/self", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(root)/0", withIntermediateDirectories: true)

        #expect(ProcStat.read(12, procRoot: root) == stat("12 (b b) Z 11 11 11 0"))
        #expect(ProcStat.read(14, procRoot: root) == nil, "gone")

        var seen: [pid_t: ProcStat] = [:]
        ProcStat.forEachProcess(procRoot: root) { pid, fields in
            seen[pid] = fields
            return true
        }
        #expect(Set(seen.keys) == [11, 12, 13], "numbered entries above 0 only")
        #expect(seen[13]?.state == UInt8(ascii: "R") && seen[13]?.group == 13)

        var limited = 0
        ProcStat.forEachProcess(procRoot: root, limit: 2) { _, _ in
            limited += 1
            return true
        }
        #expect(limited == 2)
        var stopped = 0
        ProcStat.forEachProcess(procRoot: root) { _, _ in
            stopped += 1
            return false
        }
        #expect(stopped == 1)
        var none = 0
        ProcStat.forEachProcess(procRoot: root + "/missing") { _, _ in
            none += 1
            return true
        }
        #expect(none == 0)
    }
}

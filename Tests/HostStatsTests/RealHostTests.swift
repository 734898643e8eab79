import AgentTestSupport
import Foundation
@testable import HostStats
import Testing

/// The statter on this machine's own `/proc`, `/sys/fs/cgroup` and disks, against what
/// `free`, `df`, `stat -f`, `/proc/stat` and the cgroup files say in the same test. Memory
/// and disk use move between two reads, so a figure is checked against the values read
/// just before and just after it (plus a little), a few rounds at most; counters only grow,
/// so a counter read between two others must lie between them.
@Suite(.timeLimit(.minutes(2)))
struct RealHostTests {
    /// Slack around the before/after bracket for what moves in between (other tests write
    /// files and allocate while this runs).
    static let slack = 64.0 * 1024 * 1024
    static let rounds = 5

    static func shell(_ command: String) async -> String {
        await ChildProgram.run(["/bin/sh", "-c", command]).stdout
    }

    /// The numbers on the first line of `command`'s output that starts with `prefix`.
    static func numbers(_ command: String, line prefix: String = "") async -> [Double] {
        let output = await shell(command)
        let line = output.split(separator: "\n").first { $0.hasPrefix(prefix) } ?? ""
        return line.split(separator: " ").compactMap { Double($0) }
    }

    /// Whether `value` lies between `a` and `b` (either order), widened by ``slack``.
    static func bracketed(_ value: Double, _ a: Double, _ b: Double, slack: Double = slack) -> Bool {
        value >= min(a, b) - slack && value <= max(a, b) + slack
    }

    /// Whether `figure` (a cgroup's used memory) falls between usage − inactive read by
    /// `command` (which prints the two) just before and just after it, in some round.
    static func usedFallsBetweenReads(of command: String, _ figure: () throws -> Double) async throws -> Bool {
        for _ in 0..<rounds {
            let before = await numbers(command)
            let ours = try figure()
            let after = await numbers(command)
            try #require(before.count == 2 && after.count == 2, "\(command) printed \(before) and \(after)")
            if bracketed(ours, before[0] - before[1], after[0] - after[1]) { return true }
        }
        return false
    }

    @Test func hostMemoryIsWhatFreeSays() async throws {
        let statter = try HostStatter()
        var inside = false
        for _ in 0..<Self.rounds where !inside {
            let before = await Self.numbers("free -b", line: "Mem:")
            let ours = try statter.hostMemory(.none).get()
            let after = await Self.numbers("free -b", line: "Mem:")
            try #require(before.count >= 2 && after.count >= 2, "free -b printed no Mem: line")
            // MemTotal does not move; procps's used is MemTotal - MemAvailable, as ours.
            #expect(ours.total == before[0] && ours.total == after[0])
            inside = Self.bracketed(ours.used, before[1], after[1])
        }
        #expect(inside, "memory used never fell between two reads of free")
    }

    @Test func diskIsWhatDfAndStatfsSay() async throws {
        let statter = try HostStatter()
        for path in ["/", NSTemporaryDirectory()] {
            var inside = false
            for _ in 0..<Self.rounds where !inside {
                let before = await Self.numbers("df -B1 --output=size,used '\(path)' | tail -1")
                let blocks = await Self.numbers("stat -f -c '%b %f %S' '\(path)'")
                let ours = try statter.disk(.none, path: path).get()
                let after = await Self.numbers("df -B1 --output=size,used '\(path)' | tail -1")
                try #require(before.count == 2 && after.count == 2 && blocks.count == 3)
                #expect(ours.total == before[0] && ours.total == blocks[0] * blocks[2])
                // Root-reserved blocks count as used: (blocks - free) * size, as df's Used.
                let fromStatfs = (blocks[0] - blocks[1]) * blocks[2]
                inside = Self.bracketed(ours.used, before[1], after[1]) && Self.bracketed(ours.used, fromStatfs, fromStatfs)
            }
            #expect(inside, "disk used at \(path) never fell between two reads of df")
        }
        #expect(statter.disk(.gibi, path: "/does/not/exist").failure?.notFound == true)
    }

    @Test func cpuTimesAreProcStatsCPULine() async throws {
        let awk = "awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $5}' /proc/stat"
        let before = await Self.numbers(awk)
        let ours = try HostStatter.cpuTimes(RootedFileSystem.machine).get()
        let after = await Self.numbers(awk)
        try #require(before.count == 2 && after.count == 2)
        #expect(Self.bracketed(ours.total, before[0], after[0], slack: 0))
        #expect(Self.bracketed(ours.idle, before[1], after[1], slack: 0))

        let statter = try HostStatter()
        let processors = await Self.numbers("grep -c '^processor' /proc/cpuinfo")
        #expect([Double(statter.cores)] == processors)
        let cpu = try statter.hostCPU().get()
        #expect(cpu.total == Double(statter.cores) && cpu.unit == "cores")
        #expect(cpu.used >= 0 && cpu.used <= Double(statter.cores) * 1.01, "\(cpu)")
    }

    @Test func containerizedFollowsTheReferencesRules() async throws {
        let rule = """
            if grep -qE 'docker|\\.slice|lxc|kubepods' /proc/1/cgroup 2>/dev/null; then echo 1; \
            elif [ ! -e /proc/1/cgroup ]; then echo 0; \
            elif cat /var/run/secrets/kubernetes.io/serviceaccount/token >/dev/null 2>&1; then echo 1; \
            elif grep -q sysboxfs /proc/mounts; then echo 1; \
            elif [ -e /sys/fs/cgroup/cgroup.type ]; then echo 1; else echo 0; fi
            """
        let expected = await Self.shell(rule).hasPrefix("1")
        let statter = try HostStatter()
        #expect(try statter.isContainerized().get() == expected)
        #expect((statter.cgroup != nil) == expected)
    }

    static var hasV1Memory: Bool { FileManager.default.fileExists(atPath: "/sys/fs/cgroup/memory/memory.usage_in_bytes") }

    @Test(.enabled(if: RealHostTests.hasV1Memory)) func cgroupV1FilesOnThisMachine() async throws {
        let v1 = CgroupV1Statter(fileSystem: RootedFileSystem.machine)
        let directory = "/sys/fs/cgroup/memory/"
        let limit = await Self.numbers("cat \(directory)memory.limit_in_bytes")
        #expect(try v1.memory(.none).get().total == (limit == [9_223_372_036_854_771_712] ? nil : limit.first))
        let inside = try await Self.usedFallsBetweenReads(
            of: "echo $(cat \(directory)memory.usage_in_bytes) $(awk '/^total_inactive_file /{print $2}' \(directory)memory.stat)"
        ) { try v1.memory(.none).get().used }
        #expect(inside, "cgroup v1 memory never fell between two reads of its files")

        let usage = "cat /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage 2>/dev/null || cat /sys/fs/cgroup/cpuacct/cpuacct.usage"
        let period = await Self.numbers("cat /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_period_us")
        let before = await Self.numbers(usage)
        let used = try v1.cpuUsed().get()
        let after = await Self.numbers(usage)
        try #require(before.count == 1 && after.count == 1 && period.count == 1)
        #expect(Self.bracketed(used, (before[0] / 1000).rounded(.down) / period[0], (after[0] / 1000).rounded(.down) / period[0], slack: 0))
    }

    static var isV2: Bool { RootedFileSystem.machine.isCgroup2("/sys/fs/cgroup") }

    @Test(.enabled(if: RealHostTests.isV2)) func cgroupV2FilesOnThisMachine() async throws {
        let path = try ProcCgroup.unifiedPath(Array(String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8).utf8)).get()
        let v2 = try CgroupV2Statter.chain(fileSystem: RootedFileSystem.machine, cgroupPath: path).get()
        // The nearest directory with the file, as the statter walks up.
        let walk = { (file: String) in "d=\(v2.path); while [ ! -e $d/\(file) ] && [ $d != /sys/fs/cgroup ]; do d=$(dirname $d); done; echo $d/\(file)" }
        let current = await Self.shell(walk("memory.current")).trimmingCharacters(in: .whitespacesAndNewlines)
        let stat = await Self.shell(walk("memory.stat")).trimmingCharacters(in: .whitespacesAndNewlines)
        let inside = try await Self.usedFallsBetweenReads(of: "echo $(cat \(current)) $(awk '/^inactive_file /{print $2}' \(stat))") {
            try v2.memory(.none).get().used
        }
        #expect(inside, "cgroup v2 memory never fell between two reads of its files")
    }
}

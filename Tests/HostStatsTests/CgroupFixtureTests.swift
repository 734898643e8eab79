import Foundation
@testable import HostStats
import Testing

/// The statter over fixture trees laid out as `/proc` and `/sys/fs/cgroup` are: cgroup v2
/// nested (limits found in a parent, `max` at the leaf, no limit anywhere, the root
/// cgroup), cgroup v1 (split directories, Docker's "unlimited"), a plain host, and odd
/// files giving the reference's errors.
struct CgroupFixtureTests {
    static let gib = 1024.0 * 1024 * 1024

    /// A statter whose CPU sample rewrites `files` between its two readings.
    static func statter(_ tree: FixtureTree, between files: [String: String] = [:]) throws -> HostStatter {
        try HostStatter(
            fileSystem: tree.fileSystem,
            wait: { _ in
                for (path, text) in files { try? tree.write(path, text) }
            })
    }

    @Test func v2NestedTakesLimitsFromTheParentWhenTheLeafSaysMax() throws {
        let tree = try FixtureTree()
        try tree.containerV2(cgroup: "/kubepods/pod1/ctr")
        let pod = "/sys/fs/cgroup/kubepods/pod1"
        try tree.write(pod + "/ctr/cpu.max", "max 100000\n")
        try tree.write(pod + "/cpu.max", "200000 100000\n")
        try tree.write(pod + "/ctr/memory.max", "max\n")
        try tree.write(pod + "/memory.max", "\(1 << 30)\n")
        try tree.write(pod + "/ctr/memory.current", "\(600 << 20)\n")
        try tree.write(pod + "/ctr/memory.stat", "anon 1\ninactive_file \(88 << 20)\n")
        try tree.write(pod + "/ctr/cpu.stat", "usage_usec 1000000\nuser_usec 1\n")
        let statter = try Self.statter(tree, between: [pod + "/ctr/cpu.stat": "usage_usec 1050000\n"])

        let v2 = try #require(statter.cgroup as? CgroupV2Statter)
        #expect(v2.path == pod + "/ctr")
        #expect(v2.parent?.path == pod && v2.parent?.parent?.parent?.path == "/sys/fs/cgroup")
        let cpu = try #require(try statter.containerCPU().get())
        #expect(cpu == StatResult(total: 2, unit: "cores", used: 0.5))
        #expect(cpu.text == "0.5/2 cores (25%)")
        let memory = try #require(try statter.containerMemory(.mebi).get())
        #expect(memory.text == "512/1024 MiB (50%)")
        #expect(try statter.isContainerized().get())
    }

    @Test func v2WithNoLimitAnywhereHasNoTotal() throws {
        let tree = try FixtureTree()
        try tree.containerV2(cgroup: "/docker/abc")
        let leaf = "/sys/fs/cgroup/docker/abc"
        try tree.write(leaf + "/cpu.max", "max 100000\n")
        try tree.write("/sys/fs/cgroup/docker/cpu.max", "max 100000\n")
        try tree.write(leaf + "/memory.max", "max\n")
        try tree.write(leaf + "/memory.current", "\(3 << 30)\n")
        try tree.write(leaf + "/memory.stat", "inactive_file \(1 << 30)\n")
        try tree.write(leaf + "/cpu.stat", "usage_usec 0\n")
        let statter = try Self.statter(tree, between: [leaf + "/cpu.stat": "usage_usec 25000\n"])
        #expect(try statter.containerCPU().get()?.text == "0.25 cores")
        #expect(try statter.containerMemory(.gibi).get()?.text == "2 GiB")
        #expect(try StatResult.json(statter.containerMemory(.gibi).get()).get().contains("\"total\": null"))
    }

    @Test func v2RootCgroupWithoutCPUMaxUsesTheDefaultPeriod() throws {
        let tree = try FixtureTree()
        try tree.containerV2(cgroup: "/")
        try tree.write("/sys/fs/cgroup/cpu.stat", "usage_usec 100\n")
        try tree.write("/sys/fs/cgroup/memory.current", "100\n")
        try tree.write("/sys/fs/cgroup/memory.stat", "inactive_file 40\n")
        let statter = try Self.statter(tree, between: ["/sys/fs/cgroup/cpu.stat": "usage_usec 200100\n"])
        #expect(try statter.containerCPU().get() == StatResult(total: nil, unit: "cores", used: 2))
        #expect(try statter.containerMemory(.none).get() == StatResult(total: nil, unit: "B", used: 60))
    }

    @Test func v2MissingUsageFilesAreReadFromTheParent() throws {
        let tree = try FixtureTree()
        try tree.containerV2(cgroup: "/a/b")
        try tree.directory("/sys/fs/cgroup/a/b")
        try tree.write("/sys/fs/cgroup/a/memory.current", "1000\n")
        try tree.write("/sys/fs/cgroup/a/memory.stat", "inactive_file 100\n")
        try tree.write("/sys/fs/cgroup/a/memory.max", "5000\n")
        let statter = try Self.statter(tree)
        #expect(try statter.containerMemory(.none).get()?.text == "900/5000 B (18%)")

        tree.remove("/sys/fs/cgroup/a/memory.current")
        #expect(
            statter.containerMemory(.none).failure
                == StatError(
                    "read memory usage: read parent: read parent: read memory current: read /sys/fs/cgroup/memory.current: "
                        + "open /sys/fs/cgroup/memory.current: no such file or directory", notExist: true))
        // Only a missing file goes up: a line that is not there is an error at once.
        try tree.write("/sys/fs/cgroup/a/memory.current", "1000\n")
        try tree.write("/sys/fs/cgroup/a/b/memory.stat", "anon 1\n")
        #expect(
            statter.containerMemory(.none).failure
                == StatError(
                    "read memory stats: read memory stat inactive_file: parse /sys/fs/cgroup/a/b/memory.stat: did not find line with prefix inactive_file"))
    }

    @Test func v2OddFilesGiveTheReferencesErrors() throws {
        let tree = try FixtureTree()
        try tree.containerV2(cgroup: "/c")
        let leaf = "/sys/fs/cgroup/c"
        try tree.write(leaf + "/memory.max", "99999999999999999999\n")
        try tree.write(leaf + "/memory.current", "1\n")
        try tree.write(leaf + "/memory.stat", "inactive_file 0\n")
        let statter = try Self.statter(tree)
        #expect(
            statter.containerMemory(.none).failure?.description
                == "read memory total: read memory total: parse \(leaf)/memory.max: strconv.ParseInt: parsing \"99999999999999999999\": value out of range")
        // Garbage and empty files read as "max": the parent's limit (none here).
        for odd in ["garbage\n", "", "\n\n"] {
            try tree.write(leaf + "/memory.max", odd)
            #expect(try statter.containerMemory(.none).get()?.total == nil)
        }
        try tree.write(leaf + "/memory.current", "")
        #expect(
            statter.containerMemory(.none).failure?.description
                == "read memory usage: read memory current: parse \(leaf)/memory.current: strconv.ParseInt: parsing \"\": invalid syntax")
        // cpu.max with one field, which the reference would index past.
        try tree.write(leaf + "/cpu.stat", "usage_usec 5\n")
        try tree.write(leaf + "/cpu.max", "max\n")
        #expect(statter.containerCPU().failure?.description == "get total cpu: get cpu period: get cpu period: expected line \"max\\n\" to have at least 2 parts")
        try tree.write(leaf + "/cpu.max", "100000 0\n")
        // A zero period divides as Go does: no usable total, usage infinite.
        let cpu = try #require(try statter.containerCPU().get())
        #expect(cpu.total == .infinity && cpu.used.isNaN)
        tree.remove(leaf + "/cpu.stat")
        #expect(
            statter.containerCPU().failure?.description
                == "get cgroup CPU usage: get cgroupv2 cpu used: read \(leaf)/cpu.stat: open \(leaf)/cpu.stat: no such file or directory")
    }

    @Test func v2DepthIsBoundedAsTheReferences() throws {
        let tree = try FixtureTree()
        // Eight levels below the root: nine statters, under clistat's ten.
        try tree.containerV2(cgroup: "/1/2/3/4/5/6/7/8")
        #expect(try Self.statter(tree).cgroup != nil)
        try tree.write("/proc/self/cgroup", "0::/1/2/3/4/5/6/7/8/9\n")
        #expect(throws: StatError("get cgroup statter: exceeded max supported cgroup depth of 10")) { try Self.statter(tree) }
        try tree.write("/proc/self/cgroup", "1:cpu:/\n")
        #expect(throws: StatError("get cgroup statter: get current cgroup: no cgroup entry for hierarchy 0 found")) {
            try Self.statter(tree)
        }
        tree.remove("/proc/self/cgroup")
        #expect(
            throws: StatError(
                "get cgroup statter: get current cgroup: read /proc/self/cgroup: open /proc/self/cgroup: no such file or directory",
                notExist: true)
        ) { try Self.statter(tree) }
    }

    @Test func v1SplitDirectoriesAndDockersUnlimited() throws {
        let tree = try FixtureTree()
        try tree.containerV1()
        try tree.write("/sys/fs/cgroup/cpuacct/cpuacct.usage", "1000000000\n")
        try tree.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
        try tree.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "150000\n")
        try tree.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
        try tree.write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "\(2 << 30)\n")
        try tree.write("/sys/fs/cgroup/memory/memory.stat", "cache 1\ntotal_inactive_file \(1 << 29)\n")
        let statter = try Self.statter(tree, between: ["/sys/fs/cgroup/cpuacct/cpuacct.usage": "1075000000\n"])
        #expect(statter.cgroup is CgroupV1Statter)
        #expect(try statter.containerCPU().get()?.text == "0.75/1.5 cores (50%)")
        #expect(try statter.containerMemory(.gibi).get()?.text == "1.5 GiB")

        try tree.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "\(4 << 30)\n")
        try tree.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
        #expect(try statter.containerMemory(.gibi).get()?.text == "1.5/4 GiB (38%)")
        #expect(try statter.containerCPU().get()?.total == nil)
        // A limit that is not a number is no limit.
        try tree.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "max\n")
        #expect(try statter.containerMemory(.gibi).get()?.total == nil)
    }

    @Test func v1MissingFilesListBothPathsTried() throws {
        let tree = try FixtureTree()
        try tree.containerV1()
        let statter = try Self.statter(tree)
        let joint = "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us"
        let split = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"
        #expect(
            statter.containerCPU().failure?.description == """
                get total cpu: 2 errors occurred:
                \t* get cpu period: read \(joint): open \(joint): no such file or directory
                \t* get cpu period: read \(split): open \(split): no such file or directory


                """)
        #expect(
            statter.containerMemory(.none).failure?.description == "read memory total: read /sys/fs/cgroup/memory/memory.limit_in_bytes: "
                + "open /sys/fs/cgroup/memory/memory.limit_in_bytes: no such file or directory")
    }

    @Test func aPlainHostHasNoContainerFigures() throws {
        let tree = try FixtureTree()
        try tree.host()
        let statter = try Self.statter(tree, between: ["/proc/stat": FixtureTree.procStat(total: 1200, idle: 900)])
        #expect(statter.cgroup == nil && statter.cores == 2)
        #expect(try statter.containerCPU().get() == nil)
        #expect(try statter.containerMemory(.gibi).get() == nil)
        // 200 ticks, 100 idle: half of two cores.
        #expect(try statter.hostCPU().get().text == "1/2 cores (50%)")
        #expect(try statter.hostMemory(.gibi).get().text == "2/8 GiB (25%)")
        // The cgroup.type file alone marks a container (a non-root cgroup).
        try tree.write("/sys/fs/cgroup/cgroup.type", "domain\n")
        #expect(try statter.isContainerized().get())
    }

    @Test func hostFilesMissingOrGarbled() throws {
        let tree = try FixtureTree()
        try tree.host()
        tree.remove("/proc/stat")
        #expect(
            throws: StatError(
                "get host info: failed to read proc stat: open /proc/stat: no such file or directory",
                notExist: true)
        ) { try Self.statter(tree) }
        try tree.write("/proc/stat", "cpu one two\n")
        #expect(
            throws: StatError(
                "get host info: failed to read proc stat: Error Parsing File: couldn't parse "
                    + "\"cpu one two\" (cpu): strconv.ParseFloat: parsing \"\": invalid syntax")
        ) { try Self.statter(tree) }
        try tree.write("/proc/stat", FixtureTree.procStat(total: 10, idle: 5))
        // No cpuinfo: the machine's core count; a garbled one: zero cores.
        tree.remove("/proc/cpuinfo")
        #expect(try Self.statter(tree).cores >= 1)
        try tree.write("/proc/cpuinfo", "\u{0}\u{1}garbage")
        let statter = try Self.statter(tree)
        #expect(statter.cores == 0)
        #expect(try statter.hostCPU().get().text == "0/0 cores")
        tree.remove("/proc/meminfo")
        #expect(
            statter.hostMemory(.gibi).failure?.description
                == "get memory info: error reading meminfo file /proc/meminfo: open /proc/meminfo: no such file or directory")
        try tree.write("/proc/meminfo", "")
        #expect(try statter.hostMemory(.gibi).get().text == "0/0 GiB")
        try tree.write("/proc/meminfo", "MemTotal: 1 kB\nMemAvailable: 3 kB\n")
        // Available above total wraps in Go's unsigned arithmetic, as here.
        #expect(try statter.hostMemory(.none).get().used == Double(UInt64(1024) &- 3072))
        // A directory where a file should be.
        tree.remove("/proc/1/cgroup")
        try tree.directory("/proc/1/cgroup")
        #expect(throws: StatError("get cgroup statter: read file /proc/1/cgroup: read /proc/1/cgroup: is a directory")) {
            try Self.statter(tree)
        }
    }

    @Test func diskFiguresCountReservedBlocksAsUsed() throws {
        let usage = DiskUsage(blocks: 1000, freeBlocks: 300, blockSize: 4096)
        #expect(usage == DiskUsage(blocks: 1000, freeBlocks: 300, blockSize: 4096))
        #expect(usage.total == 4_096_000 && usage.used == 2_867_200)
        let statter = try HostStatter(fileSystem: MemoryFileSystem(files: ["/proc/stat": "cpu 1 1 1 1\n"])) { _ in
        } diskUsage: { path in
            path == "/" ? .success(usage) : .failure(DiskError(errno: ENOENT))
        }
        #expect(try statter.disk(.kibi, path: "").get().text == "2800/4000 KiB (70%)")
        #expect(statter.disk(.kibi, path: "/nope").failure?.notFound == true)
        #expect(DiskError(errno: EACCES).description == "permission denied")
        #expect(DiskUsage.of("/a\u{0}b").failure == DiskError(errno: EINVAL))
    }
}

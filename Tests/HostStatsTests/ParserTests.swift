@testable import HostStats
import Testing

/// Each reader of a cgroup or `/proc` file on its own, with the reference's errors for odd
/// contents.
struct ParserTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func integersParseAsGoDoes() throws {
        #expect(try GoNumbers.parseInt64(Array("+5".utf8)[...]).get() == 5)
        #expect(try GoNumbers.parseInt64(Array("-9223372036854775808".utf8)[...]).get() == .min)
        let range = GoNumbers.parseInt64(Array("9223372036854775808".utf8)[...]).failure
        #expect(range == .init(kind: .range, message: "strconv.ParseInt: parsing \"9223372036854775808\": value out of range"))
        #expect(GoNumbers.parseInt64(Array("max".utf8)[...]).failure?.message == "strconv.ParseInt: parsing \"max\": invalid syntax")
        #expect(GoNumbers.parseInt64([][...]).failure?.kind == .syntax)
        #expect(GoNumbers.parseInt64(Array("-".utf8)[...]).failure?.kind == .syntax)
        #expect(GoNumbers.parseUInt64(Array("+5".utf8)[...]).failure?.kind == .syntax)
        #expect(try GoNumbers.parseUInt64(Array("18446744073709551615".utf8)[...]).get() == .max)
    }

    @Test func wholeFileValues() throws {
        #expect(try CgroupValues.int64(Self.bytes(" 1073741824\n"), path: "/m").get() == 1_073_741_824)
        let max = CgroupValues.int64(Self.bytes("max\n"), path: "/sys/fs/cgroup/memory.max").failure
        #expect(max == StatError("parse /sys/fs/cgroup/memory.max: strconv.ParseInt: parsing \"max\": invalid syntax", syntax: true))
        #expect(CgroupValues.int64([], path: "/m").failure?.syntax == true)
    }

    @Test func separatedFields() throws {
        let cpuMax = Self.bytes("max 100000\n")
        #expect(try CgroupValues.int64(cpuMax, path: "/c", separator: 32, index: 1).get() == 100_000)
        #expect(CgroupValues.int64(cpuMax, path: "/c", separator: 32, index: 0).failure?.syntax == true)
        // One field where two are wanted: an error (the reference indexes past the end).
        let short = CgroupValues.int64(Self.bytes("max\n"), path: "/c", separator: 32, index: 1).failure
        #expect(short == StatError("expected line \"max\\n\" to have at least 2 parts"))
        // Split at each space: a double space leaves an empty field.
        #expect(CgroupValues.int64(Self.bytes("50000  100000"), path: "/c", separator: 32, index: 1).failure?.syntax == true)
    }

    @Test func prefixedLines() throws {
        let stat = Self.bytes("anon 5\ninactive_anon 7\r\n  inactive_file 4096  \nactive_file 1\n")
        #expect(try CgroupValues.int64(stat, path: "/s", prefix: "inactive_file").get() == 4096)
        #expect(
            CgroupValues.int64(stat, path: "/s", prefix: "total_inactive_file").failure
                == StatError("parse /s: did not find line with prefix total_inactive_file"))
        #expect(
            CgroupValues.int64(Self.bytes("inactive_file 1 2\n"), path: "/s", prefix: "inactive_file").failure
                == StatError("parse /s: expected two fields but got inactive_file 1 2"))
        // A line longer than bufio.Scanner's token ends the scan there.
        let long = Self.bytes(String(repeating: "x", count: 70_000) + "\ninactive_file 3\n")
        #expect(CgroupValues.int64(long, path: "/s", prefix: "inactive_file").failure?.description.contains("did not find") == true)
    }

    @Test func theUnifiedHierarchyEntry() throws {
        #expect(try ProcCgroup.unifiedPath(Self.bytes("12:memory:/a\n0::/user.slice/x.scope\n")).get() == "/user.slice/x.scope")
        // v1.2.1: a path holding colons keeps them.
        #expect(try ProcCgroup.unifiedPath(Self.bytes("0::/pod:1/c\n")).get() == "/pod:1/c")
        #expect(ProcCgroup.unifiedPath(Self.bytes("1:cpu:/\n")).failure == StatError("no cgroup entry for hierarchy 0 found"))
        #expect(
            ProcCgroup.unifiedPath(Self.bytes("garbage\n0::/\n")).failure
                == StatError("parse entry /proc/self/cgroup: expected at least 3 colon-separated fields in \"garbage\""))
        #expect(
            ProcCgroup.unifiedPath([]).failure
                == StatError("parse entry /proc/self/cgroup: expected at least 3 colon-separated fields in \"\""))
    }

    @Test func containerMarkersAndCores() throws {
        #expect(ProcCgroup.namesContainer(Self.bytes("0::/system.slice/docker-1.scope\n")))
        #expect(ProcCgroup.namesContainer(Self.bytes("1:name=systemd:/kubepods/burstable\n")))
        #expect(!ProcCgroup.namesContainer(Self.bytes("0::/init.scope\n")))
        #expect(ProcCgroup.mountsSysbox(Self.bytes("sysboxfs /proc/swaps fuse rw 0 0\n")))
        #expect(ProcCgroup.processorCount(Self.bytes("processor\t: 0\nflags: a\n\nprocessor : 1\nprocessors: 9\nprocessor\n")) == 2)
        #expect(ProcCgroup.processorCount(Self.bytes("garbage")) == 0)
    }

    @Test func meminfo() throws {
        let memory = try HostProcFiles.memory(Self.bytes("MemTotal: 100 kB\nMemFree: 10 kB\nMemAvailable: 40 kB\n")).get()
        #expect(memory == .init(total: 102_400, available: 40_960))
        // Before MemAvailable: free + buffers + cached.
        let old = try HostProcFiles.memory(Self.bytes("MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 5 kB\nCached: 20 kB\n")).get()
        #expect(old.available == 35 * 1024)
        // Values that do not parse are skipped; units other than kB too.
        let odd = try HostProcFiles.memory(Self.bytes("MemTotal: lots\nMemAvailable: 7 MB\nHugePages: 3\n\n")).get()
        #expect(odd == .init(total: 0, available: 0))
        #expect(HostProcFiles.memory(Self.bytes("MemTotal 100 kB\n")).failure == StatError("separator ':' not found"))
    }

    @Test func procStatCPUTimes() throws {
        // user nice system idle iowait irq softirq steal guest guest_nice: guest is left out.
        let times = try HostProcFiles.cpuTimes(Self.bytes("cpu  1 2 3 4 5 6 7 8 100 100\ncpu0 1 2 3 4 5 6 7 8 0 0\n")).get()
        #expect(times == .init(total: 36, idle: 4))
        // Old kernels print fewer fields.
        #expect(try HostProcFiles.cpuTimes(Self.bytes("cpu 1 2 3 4\n")).get() == .init(total: 10, idle: 4))
        #expect(
            HostProcFiles.cpuTimes(Self.bytes("cpu 1 x 3 4\n")).failure
                == StatError(
                    "Error Parsing File: couldn't parse \"cpu 1 x 3 4\" (cpu): strconv.ParseFloat: parsing \"\": invalid syntax"))
        #expect(
            HostProcFiles.cpuTimes(Self.bytes("cpufoo 1 2\n")).failure
                == StatError(
                    "Error Parsing File: couldn't parse \"cpufoo 1 2\" (cpu/cpuid): strconv.ParseInt: parsing \"foo\": invalid syntax"))
        #expect(
            HostProcFiles.cpuTimes(Self.bytes("intr 5 1 x\n")).failure
                == StatError(
                    "Error Parsing File: couldn't parse \"x\" (intr1): strconv.ParseUint: parsing \"x\": invalid syntax"))
        #expect(
            HostProcFiles.cpuTimes(Self.bytes("softirq 1 2\n")).failure
                == StatError(
                    "Error Parsing File: couldn't parse \"softirq 1 2\" (softirq): EOF"))
        // No cpu line at all: zero times (the reference divides nothing by them).
        #expect(try HostProcFiles.cpuTimes([]).get() == .init(total: 0, idle: 0))
    }

    @Test func goPaths() throws {
        #expect(GoPath.clean("") == ".")
        #expect(GoPath.clean("/../a//b/./c/..") == "/a/b")
        #expect(GoPath.clean("a/../..") == "..")
        #expect(GoPath.dir("/a/b") == "/a")
        #expect(GoPath.dir("/a") == "/")
        #expect(GoPath.dir("/") == "/")
        #expect(GoPath.dir("a") == ".")
        #expect(GoPath.join("/sys/fs/cgroup", "/") == "/sys/fs/cgroup")
        #expect(GoPath.join("/sys/fs/cgroup", "../x") == "/sys/fs/x")
    }
}

import AgentTestSupport
import Foundation
@testable import HostStats

/// A fake `/proc` and `/sys` under a temporary directory, read through ``RootedFileSystem``;
/// removed when released.
final class FixtureTree: Sendable {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "host-stats-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var fileSystem: RootedFileSystem { RootedFileSystem(root: root) }

    /// Writes `text` at the absolute `path` inside the tree (directories made as needed).
    func write(_ path: String, _ text: String) throws {
        let location = root + path
        try FileManager.default.createDirectory(
            atPath: (location as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try TestFile.write(location, text)
    }

    /// Makes a directory inside the tree.
    func directory(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: root + path, withIntermediateDirectories: true)
    }

    func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: root + path)
    }

    /// A quiet two-core host: `/proc/stat`, `/proc/cpuinfo`, `/proc/meminfo` (8 GiB, 6 GiB
    /// available), `/proc/mounts`, and `/proc/1/cgroup` naming no container.
    func host() throws {
        try write("/proc/stat", Self.procStat(total: 1000, idle: 800))
        try write("/proc/cpuinfo", "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\nmodel name\t: x\n")
        try write("/proc/meminfo", "MemTotal:        8388608 kB\nMemFree:         1048576 kB\nMemAvailable:    6291456 kB\nBuffers:          100 kB\n")
        try write("/proc/mounts", "/dev/vda / ext4 rw 0 0\n")
        try write("/proc/1/cgroup", "0::/init.scope\n")
    }

    /// A `/proc/stat` whose `cpu` line sums to `total` ticks with `idle` of them idle.
    static func procStat(total: Int, idle: Int) -> String {
        let user = total - idle
        return "cpu  \(user) 0 0 \(idle) 0 0 0 0 0 0\ncpu0 \(user) 0 0 \(idle) 0 0 0 0 0 0\nintr 5 1 2\nctxt 10\nbtime 1700000000\nprocesses 7\nprocs_running 1\nprocs_blocked 0\nsoftirq 1 0 0 0 0 0 0 0 0 0 1\n"
    }

    /// A containerized host on the unified hierarchy (the marker file the fixture file
    /// system reads as cgroup2), the process in `cgroup`.
    func containerV2(cgroup: String) throws {
        try host()
        try write("/proc/1/cgroup", "0::/docker/abc\n")
        try write("/proc/self/cgroup", "0::\(cgroup)\n")
        try write("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
    }

    /// A containerized host on cgroup v1, with the split `cpu` and `cpuacct` directories.
    func containerV1() throws {
        try host()
        try write("/proc/1/cgroup", "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n")
        try directory("/sys/fs/cgroup/memory")
    }
}

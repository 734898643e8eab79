/// The legacy hierarchies (cgroup v1) as clistat reads them: fixed paths under
/// `/sys/fs/cgroup`, the joint `cpu,cpuacct` directory first, then `cpuacct` and `cpu`.
public struct CgroupV1Statter: CgroupStatter {
    /// Docker's "no limit": the largest int64 rounded down to 4 KiB pages.
    public static let unlimitedMemory: Int64 = 9_223_372_036_854_771_712

    /// CPU time used (ns), CFS quota and period (µs): the joint directory, then the split one.
    static let usagePaths = ("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", "/sys/fs/cgroup/cpuacct/cpuacct.usage")
    static let quotaPaths = ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    static let periodPaths = ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    static let limitPath = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
    static let memoryUsagePath = "/sys/fs/cgroup/memory/memory.usage_in_bytes"
    static let memoryStatPath = "/sys/fs/cgroup/memory/memory.stat"

    let fileSystem: any HostFileSystem

    public init(fileSystem: any HostFileSystem) {
        self.fileSystem = fileSystem
    }

    public func cpuUsed() -> Result<Double, StatError> {
        let usage = firstOf(Self.usagePaths, "read cpu used")
        return usage.flatMap { nanoseconds in
            period().map { Double(nanoseconds / 1000) / Double($0) }
        }
    }

    public func cpuTotal() -> Result<Double, StatError> {
        period().flatMap { period in
            firstOf(Self.quotaPaths, "get cpu quota").map { quota in quota < 0 ? -1 : Double(quota) / Double(period) }
        }
    }

    private func period() -> Result<Int64, StatError> {
        firstOf(Self.periodPaths, "get cpu period")
    }

    /// The first path's value, else the second's; both failures listed otherwise.
    private func firstOf(_ paths: (String, String), _ context: String) -> Result<Int64, StatError> {
        switch fileSystem.int64(paths.0) {
        case .success(let value): return .success(value)
        case .failure(let first):
            return fileSystem.int64(paths.1).mapError { StatError.multiple([first.wrapped(context), $0.wrapped(context)]) }
        }
    }

    public func memory(_ prefix: StatPrefix) -> Result<StatResult, StatError> {
        var limit: Int64
        switch fileSystem.int64(Self.limitPath) {
        case .success(let value): limit = value
        // Not a number: taken as no limit.
        case .failure(let error) where error.syntax: limit = -1
        case .failure(let error): return .failure(error.wrapped("read memory total"))
        }
        if limit == Self.unlimitedMemory { limit = -1 }
        return fileSystem.int64(Self.memoryUsagePath).mapError { $0.wrapped("read memory usage") }.flatMap { usage in
            fileSystem.int64(Self.memoryStatPath, prefix: "total_inactive_file").mapError { $0.wrapped("read memory stats") }.map { inactive in
                StatResult(total: limit > 0 ? Double(limit) : nil, unit: "B", used: Double(usage &- inactive), prefix: prefix)
            }
        }
    }
}

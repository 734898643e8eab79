/// A process's cgroup's figures (clistat's `cgroupStatter`): CPU time used in CFS periods,
/// the CPU limit in cores, and memory.
public protocol CgroupStatter: Sendable {
    func cpuUsed() -> Result<Double, StatError>
    /// The limit in cores; zero or less when there is none.
    func cpuTotal() -> Result<Double, StatError>
    func memory(_ prefix: StatPrefix) -> Result<StatResult, StatError>
}

/// cgroup v2 as clistat v1.2.1 reads it: a statter per cgroup from the process's up to the
/// root, each asking its parent for what its directory lacks (`max`, a missing file).
public final class CgroupV2Statter: CgroupStatter {
    /// The deepest chain clistat walks (its `maxSupportedCgroupDepth`).
    public static let maxDepth = 10
    /// The kernel's CFS period when no `cpu.max` says otherwise (100 ms).
    public static let defaultPeriodMicroseconds = 100_000.0

    let fileSystem: any HostFileSystem
    /// The cgroup's directory under `/sys/fs/cgroup`.
    public let path: String
    public let parent: CgroupV2Statter?

    /// The chain for the cgroup at `cgroupPath` (as `/proc/self/cgroup` names it).
    public static func chain(fileSystem: any HostFileSystem, cgroupPath: String) -> Result<CgroupV2Statter, StatError> {
        make(fileSystem, cgroupPath, depth: 1)
    }

    private static func make(_ fileSystem: any HostFileSystem, _ path: String, depth: Int) -> Result<CgroupV2Statter, StatError> {
        guard depth < maxDepth else { return .failure(StatError("exceeded max supported cgroup depth of \(maxDepth)")) }
        let clean = GoPath.clean(path)
        var parent: CgroupV2Statter?
        let parentPath = GoPath.dir(clean)
        if parentPath != clean {
            switch make(fileSystem, parentPath, depth: depth + 1) {
            case .success(let statter): parent = statter
            case .failure(let error): return .failure(error)
            }
        }
        return .success(CgroupV2Statter(fileSystem, GoPath.join(HostStatter.cgroupRoot, clean), parent))
    }

    private init(_ fileSystem: any HostFileSystem, _ path: String, _ parent: CgroupV2Statter?) {
        self.fileSystem = fileSystem
        self.path = path
        self.parent = parent
    }

    public func cpuUsed() -> Result<Double, StatError> {
        let usage = fileSystem.int64(path + "/cpu.stat", prefix: "usage_usec").mapError { $0.wrapped("get cgroupv2 cpu used") }
        return usage.flatMap { usage in
            cpuPeriod().mapError { $0.wrapped("get cpu period") }.map { Double(usage) / $0 }
        }
    }

    public func cpuTotal() -> Result<Double, StatError> {
        cpuPeriod().mapError { $0.wrapped("get cpu period") }.flatMap { period in
            cpuQuota().mapError { $0.wrapped("get cpu quota") }.map { $0 / period }
        }
    }

    /// `cpu.max`'s first field; `max` or no file asks the parent; at the root, -1 (none).
    func cpuQuota() -> Result<Double, StatError> {
        switch fileSystem.int64(path + "/cpu.max", separator: UInt8(ascii: " "), index: 0) {
        case .success(let quota): return .success(Double(quota))
        case .failure(let error) where error.syntax || error.notExist: return fromParent({ $0.cpuQuota() }, else: .success(-1))
        case .failure(let error): return .failure(error.wrapped("get cpu quota"))
        }
    }

    /// `cpu.max`'s second field; unreadable as a number or no file asks the parent; at the
    /// root, the kernel's default.
    func cpuPeriod() -> Result<Double, StatError> {
        switch fileSystem.int64(path + "/cpu.max", separator: UInt8(ascii: " "), index: 1) {
        case .success(let period): return .success(Double(period))
        case .failure(let error) where error.syntax || error.notExist:
            return fromParent({ $0.cpuPeriod() }, else: .success(Self.defaultPeriodMicroseconds))
        case .failure(let error): return .failure(error.wrapped("get cpu period"))
        }
    }

    public func memory(_ prefix: StatPrefix) -> Result<StatResult, StatError> {
        memoryMax().mapError { $0.wrapped("read memory total") }.flatMap { total in
            memoryCurrent().mapError { $0.wrapped("read memory usage") }.flatMap { current in
                memoryInactiveFile().mapError { $0.wrapped("read memory stats") }.map { inactive in
                    StatResult(total: total, unit: "B", used: Double(current &- inactive), prefix: prefix)
                }
            }
        }
    }

    /// `memory.max`; `max` or no file asks the parent; at the root, no limit.
    func memoryMax() -> Result<Double?, StatError> {
        switch fileSystem.int64(path + "/memory.max") {
        case .success(let limit): return .success(Double(limit))
        case .failure(let error) where error.syntax || error.notExist: return fromParent({ $0.memoryMax() }, else: .success(nil))
        case .failure(let error): return .failure(error.wrapped("read memory total"))
        }
    }

    /// `memory.current`; no file asks the parent.
    func memoryCurrent() -> Result<Int64, StatError> {
        switch fileSystem.int64(path + "/memory.current") {
        case .success(let current): return .success(current)
        case .failure(let error) where error.notExist:
            return fromParent({ $0.memoryCurrent() }, else: .failure(error.wrapped("read memory current")))
        case .failure(let error): return .failure(error.wrapped("read memory current"))
        }
    }

    /// `inactive_file` of `memory.stat`; no file asks the parent.
    func memoryInactiveFile() -> Result<Int64, StatError> {
        switch fileSystem.int64(path + "/memory.stat", prefix: "inactive_file") {
        case .success(let bytes): return .success(bytes)
        case .failure(let error) where error.notExist:
            return fromParent({ $0.memoryInactiveFile() }, else: .failure(error.wrapped("read memory stat inactive_file")))
        case .failure(let error): return .failure(error.wrapped("read memory stat inactive_file"))
        }
    }

    /// clistat's `getFromParentOrFallback`: the parent's answer (its error as `read parent: …`),
    /// or `fallback` at the root.
    private func fromParent<T>(_ get: (CgroupV2Statter) -> Result<T, StatError>, else fallback: Result<T, StatError>) -> Result<T, StatError> {
        guard let parent else { return fallback }
        return get(parent).mapError { $0.wrapped("read parent") }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// The workspace's figures as `coder stat` computes them (clistat v1.2.1): the host's from
/// `/proc`, a container's from its cgroup (v2, else v1), disks by `statfs`.
public struct HostStatter: Sendable {
    /// Where the cgroup file systems are mounted.
    public static let cgroupRoot = "/sys/fs/cgroup"
    /// Between the two CPU samples: the reference's 100 ms (also the default CFS period,
    /// which is why Δusage/period reads as cores).
    public static let sampleInterval: Duration = .milliseconds(100)

    public let fileSystem: any HostFileSystem
    /// Cores (`processor` lines of `/proc/cpuinfo`).
    public let cores: Int
    /// The container's cgroup; nil when the host does not look containerized.
    public let cgroup: (any CgroupStatter)?
    let sampleInterval: Duration
    let wait: @Sendable (Duration) -> Void
    let diskUsage: @Sendable (String) -> Result<DiskUsage, DiskError>

    /// clistat's `New`: checks `/proc/stat` reads, counts the cores and finds the container's
    /// cgroup, failing as the reference does (`get cgroup statter: get current cgroup: …`).
    public init(
        fileSystem: any HostFileSystem = RootedFileSystem.machine, sampleInterval: Duration = Self.sampleInterval,
        wait: @escaping @Sendable (Duration) -> Void = HostStatter.sleep,
        diskUsage: @escaping @Sendable (String) -> Result<DiskUsage, DiskError> = DiskUsage.of
    ) throws(StatError) {
        self.fileSystem = fileSystem
        self.sampleInterval = sampleInterval
        self.wait = wait
        self.diskUsage = diskUsage
        if case .failure(let error) = Self.readCPUTimes(fileSystem) {
            throw error.wrapped("failed to read proc stat").wrapped("get host info")
        }
        if case .success(let bytes) = fileSystem.read("/proc/cpuinfo") {
            cores = ProcCgroup.processorCount(bytes)
        } else {
            cores = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        }
        switch Self.cgroupStatter(fileSystem) {
        case .success(let statter): cgroup = statter
        case .failure(let error): throw error.wrapped("get cgroup statter")
        }
    }

    private static func cgroupStatter(_ fileSystem: any HostFileSystem) -> Result<(any CgroupStatter)?, StatError> {
        switch containerized(fileSystem) {
        case .failure(let error): return .failure(error)
        case .success(false): return .success(nil)
        case .success(true): break
        }
        guard fileSystem.isCgroup2(cgroupRoot) else { return .success(CgroupV1Statter(fileSystem: fileSystem)) }
        let path = fileSystem.contents("/proc/self/cgroup").flatMap(ProcCgroup.unifiedPath)
        return path.mapError { $0.wrapped("get current cgroup") }.flatMap { path in
            CgroupV2Statter.chain(fileSystem: fileSystem, cgroupPath: path).map { $0 }
        }
    }

    /// Whether the host looked like a container when this statter was made (its cgroup was
    /// found then): `isContainerized()` without reading the files again.
    public var containerizedAtStart: Bool { cgroup != nil }

    /// Whether the host looks like a container (clistat's `IsContainerized`).
    public func isContainerized() -> Result<Bool, StatError> {
        Self.containerized(fileSystem)
    }

    /// `/proc/1/cgroup` names a runtime; else a Kubernetes service account token; else a
    /// Sysbox mount; else `/sys/fs/cgroup/cgroup.type` (absent at a host's root cgroup).
    static func containerized(_ fileSystem: any HostFileSystem) -> Result<Bool, StatError> {
        switch fileSystem.read("/proc/1/cgroup") {
        case .failure(let error) where error.notExist: return .success(false)
        case .failure(let error): return .failure(StatError(error).wrapped("read file /proc/1/cgroup"))
        case .success(let bytes): if ProcCgroup.namesContainer(bytes) { return .success(true) }
        }
        if case .success = fileSystem.read("/var/run/secrets/kubernetes.io/serviceaccount/token") { return .success(true) }
        switch fileSystem.read("/proc/mounts") {
        case .failure(let error) where error.notExist: return .success(false)
        case .failure(let error): return .failure(StatError(error).wrapped("read file /proc/mounts"))
        case .success(let bytes): if ProcCgroup.mountsSysbox(bytes) { return .success(true) }
        }
        let typePath = cgroupRoot + "/cgroup.type"
        return fileSystem.exists(typePath).mapError { StatError($0).wrapped("check file exists \(typePath)") }
    }

    // MARK: CPU

    /// Both CPU figures around one shared wait (`coder stat` samples them side by side);
    /// nil for a figure not asked for. The container's is nil inside when not containerized.
    public func cpu(host: Bool, container: Bool) -> (host: Result<StatResult, StatError>?, container: Result<StatResult?, StatError>?) {
        var hostFirst: Result<HostProcFiles.CPUTimes, StatError>?
        if host { hostFirst = Self.cpuTimes(fileSystem).mapError { $0.wrapped("get first cpu sample") } }
        var containerFirst: Result<(total: Double, used: Double), StatError>?
        if container, let cgroup {
            containerFirst = cgroup.cpuTotal().mapError { $0.wrapped("get total cpu") }.flatMap { total in
                cgroup.cpuUsed().mapError { $0.wrapped("get cgroup CPU usage") }.map { (total, $0) }
            }
        }
        let hostSampling = (try? hostFirst?.get()) != nil
        let containerSampling = (try? containerFirst?.get()) != nil
        if hostSampling || containerSampling { wait(sampleInterval) }

        var hostResult: Result<StatResult, StatError>?
        if let hostFirst {
            hostResult = hostFirst.flatMap { first in
                Self.cpuTimes(fileSystem).mapError { $0.wrapped("get second cpu sample") }.map { hostCPU(from: first, to: $0) }
            }
        }
        var containerResult: Result<StatResult?, StatError>?
        if container {
            if let containerFirst, let cgroup {
                containerResult = containerFirst.flatMap { first in
                    cgroup.cpuUsed().mapError { $0.wrapped("get cgroup CPU usage") }.map { second in
                        // A counter reset between the samples counts from zero.
                        let used = second < first.used ? second : second - first.used
                        return StatResult(total: first.total > 0 ? first.total : nil, unit: "cores", used: used)
                    }
                }
            } else {
                containerResult = .success(nil)
            }
        }
        return (hostResult, containerResult)
    }

    /// The host's CPU in cores over one sample interval; the total is the core count.
    public func hostCPU() -> Result<StatResult, StatError> {
        cpu(host: true, container: false).host ?? .failure(StatError("no sample"))
    }

    /// The container's CPU in cores over one sample interval: Δusage ÷ CFS period; the
    /// total is quota ÷ period when there is a quota. Nil when not containerized.
    public func containerCPU() -> Result<StatResult?, StatError> {
        cpu(host: false, container: true).container ?? .success(nil)
    }

    private func hostCPU(from first: HostProcFiles.CPUTimes, to second: HostProcFiles.CPUTimes) -> StatResult {
        var result = StatResult(total: Double(cores), unit: "cores", used: 0)
        let total = second.total - first.total
        guard total != 0 else { return result }
        let busy = total - (second.idle - first.idle)
        result.used = busy * Double(cores) / total
        return result
    }

    /// A CPU sample (go-sysinfo's `CPUTime`).
    static func cpuTimes(_ fileSystem: any HostFileSystem) -> Result<HostProcFiles.CPUTimes, StatError> {
        readCPUTimes(fileSystem).mapError { $0.wrapped("error fetching CPU stats") }
    }

    /// procfs's `Stat`.
    static func readCPUTimes(_ fileSystem: any HostFileSystem) -> Result<HostProcFiles.CPUTimes, StatError> {
        fileSystem.read("/proc/stat").mapError(StatError.init).flatMap(HostProcFiles.cpuTimes)
    }

    // MARK: Memory and disk

    /// The host's memory: `MemTotal`, and used = `MemTotal − MemAvailable`.
    public func hostMemory(_ prefix: StatPrefix) -> Result<StatResult, StatError> {
        fileSystem.read("/proc/meminfo")
            .mapError { StatError($0).wrapped("error reading meminfo file /proc/meminfo") }
            .flatMap(HostProcFiles.memory)
            .mapError { $0.wrapped("get memory info") }
            .map { StatResult(total: Double($0.total), unit: "B", used: Double($0.total &- $0.available), prefix: prefix) }
    }

    /// The container's memory from its cgroup; nil when not containerized.
    public func containerMemory(_ prefix: StatPrefix) -> Result<StatResult?, StatError> {
        guard let cgroup else { return .success(nil) }
        return cgroup.memory(prefix).map { $0 }
    }

    /// The file system holding `path` ("" is `/`): total = blocks × block size, used =
    /// (blocks − free blocks) × block size, so root-reserved blocks count as used.
    public func disk(_ prefix: StatPrefix, path: String) -> Result<StatResult, DiskError> {
        diskUsage(path.isEmpty ? "/" : path)
            .map { StatResult(total: $0.total, unit: "B", used: $0.used, prefix: prefix) }
    }

    /// Sleeps the calling thread (a CLI's sample; the reference's `time.After`).
    public static let sleep: @Sendable (Duration) -> Void = { duration in
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}

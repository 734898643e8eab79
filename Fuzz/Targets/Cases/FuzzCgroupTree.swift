import HostStats

/// The whole statter over an odd `/proc` and `/sys/fs/cgroup` in memory (HostStats'
/// `HostStatter` with cgroup v2 or v1): file contents, missing files and the process's
/// cgroup path come from the input; building it and every figure give a result or the
/// reference's error, never a trap, and a v2 chain never walks past clistat's depth.
public func fuzzCgroupTree(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let v2 = input.bool()
    let leaf = "/sys/fs/cgroup/a/b"
    let names =
        v2
        ? [
            "/proc/self/cgroup", leaf + "/cpu.max", leaf + "/cpu.stat", leaf + "/memory.max", leaf + "/memory.current",
            leaf + "/memory.stat", "/sys/fs/cgroup/a/cpu.max", "/sys/fs/cgroup/a/memory.max", "/sys/fs/cgroup/memory.current",
        ]
        : [
            "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.stat",
        ]
    var files: [String: String] = [
        "/proc/stat": "cpu 1 2 3 4\n", "/proc/1/cgroup": "0::/docker/x\n", "/proc/self/cgroup": "0::/a/b\n",
    ]
    for name in names {
        // Absent, or the input's bytes.
        if input.bool() { files[name] = String(decoding: input.data(maxLength: 64), as: UTF8.self) } else { files[name] = nil }
    }
    if input.bool() { files["/proc/meminfo"] = String(decoding: input.data(maxLength: 128), as: UTF8.self) }
    let statter: HostStatter
    do {
        statter = try HostStatter(fileSystem: MemoryFileSystem(files: files, cgroup2: v2)) { _ in }
    } catch {
        require(error.description.hasPrefix("get "), "\(error)")
        return 0
    }
    if let chain = statter.cgroup as? CgroupV2Statter {
        var depth = 1
        var node = chain.parent
        while let next = node { depth += 1; node = next.parent }
        require(depth < CgroupV2Statter.maxDepth, "a chain of \(depth)")
    }
    _ = statter.containerCPU()
    _ = statter.hostCPU()
    for prefix in StatPrefix.allCases {
        if case .success(let memory?) = statter.containerMemory(prefix) { _ = memory.text; _ = memory.json() }
        if case .success(let memory) = statter.hostMemory(prefix) { _ = memory.text; _ = memory.json() }
    }
    return 0
}

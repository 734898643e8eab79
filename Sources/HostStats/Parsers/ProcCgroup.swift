/// The process's cgroup and whether the host is a container, from `/proc` (clistat's
/// `currentProcCgroup` and `IsContainerized`).
public enum ProcCgroup {
    /// The path of the unified hierarchy's `0::<path>` entry, as clistat v1.2.1 reads it:
    /// every line must have three colon-separated fields (the path may hold more colons).
    public static func unifiedPath(_ bytes: [UInt8]) -> Result<String, StatError> {
        let text = GoText.trimSpace(bytes[...])
        for entry in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let trimmed = GoText.trimSpace(entry)
            let parts = trimmed.split(separator: UInt8(ascii: ":"), maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else {
                return .failure(
                    StatError(
                        "parse entry /proc/self/cgroup: expected at least 3 colon-separated fields in \(GoText.quote(trimmed))"))
            }
            if parts[0].elementsEqual("0".utf8) { return .success(GoText.string(parts[2])) }
        }
        return .failure(StatError("no cgroup entry for hierarchy 0 found"))
    }

    /// Whether a line of `/proc/1/cgroup` names a container runtime's cgroup.
    public static func namesContainer(_ bytes: [UInt8]) -> Bool {
        GoText.scannerLines(bytes).contains { line in
            ["docker", ".slice", "lxc", "kubepods"].contains { GoText.contains(line, $0) }
        }
    }

    /// Whether `/proc/mounts` lists a Sysbox file system.
    public static func mountsSysbox(_ bytes: [UInt8]) -> Bool {
        GoText.scannerLines(bytes).contains { GoText.contains($0, "sysboxfs") }
    }

    /// The `processor` lines of `/proc/cpuinfo` (clistat's core count).
    public static func processorCount(_ bytes: [UInt8]) -> Int {
        var count = 0
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let parts = line.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            if parts.count > 1, GoText.trimSpace(parts[0]).elementsEqual("processor".utf8) { count += 1 }
        }
        return count
    }
}

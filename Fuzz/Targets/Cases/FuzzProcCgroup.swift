import HostStats

/// The readers of `/proc/self/cgroup`, `/proc/1/cgroup`, `/proc/mounts` and
/// `/proc/cpuinfo` (HostStats' `ProcCgroup`): any bytes give an answer, never a trap; the
/// unified path found is the rest of a `0:…:` line; cores never outnumber lines; the
/// container markers are found only where their words are.
public func fuzzProcCgroup(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let bytes = input.rest()
    let text = String(decoding: bytes, as: UTF8.self)
    switch ProcCgroup.unifiedPath(bytes) {
    case .success(let path):
        // (Invalid UTF-8 decodes differently alone and within the whole text.)
        let valid = String(validating: bytes, as: UTF8.self) != nil
        require(text.contains("0:") && (!valid || text.contains(path)), "path \(path) not in the file")
    case .failure(let error):
        let message = error.description
        require(message == "no cgroup entry for hierarchy 0 found" || message.hasPrefix("parse entry /proc/self/cgroup: "), message)
    }
    let lines = bytes.split(separator: UInt8(ascii: "\n")).count
    require(ProcCgroup.processorCount(bytes) <= lines, "more cores than lines")
    if ProcCgroup.namesContainer(bytes) {
        require(["docker", ".slice", "lxc", "kubepods"].contains { text.contains($0) }, "a container without its word")
    }
    if ProcCgroup.mountsSysbox(bytes) { require(text.contains("sysboxfs"), "sysbox without its word") }
    return 0
}

import HostStats

/// The readers of `/proc/self/cgroup`, `/proc/1/cgroup`, `/proc/mounts` and
/// `/proc/cpuinfo` (HostStats' `ProcCgroup`): any bytes give an answer, never a trap; the
/// unified path found is the rest of a `0:…:` line; cores never outnumber lines; the
/// container markers are found only where their words are.
public func fuzzProcCgroup(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let bytes = input.rest()
    switch ProcCgroup.unifiedPath(bytes) {
    case .success(let path):
        // (Invalid UTF-8 decodes differently alone and within the whole text.)
        let valid = String(validating: bytes, as: UTF8.self) != nil
        require(has(bytes, "0:") && (!valid || has(bytes, path)), "path \(path) not in the file")
    case .failure(let error):
        let message = error.description
        require(message == "no cgroup entry for hierarchy 0 found" || message.hasPrefix("parse entry /proc/self/cgroup: "), message)
    }
    let lines = bytes.split(separator: UInt8(ascii: "\n")).count
    require(ProcCgroup.processorCount(bytes) <= lines, "more cores than lines")
    if ProcCgroup.namesContainer(bytes) {
        require(["docker", ".slice", "lxc", "kubepods"].contains { has(bytes, $0) }, "a container without its word")
    }
    if ProcCgroup.mountsSysbox(bytes) { require(has(bytes, "sysboxfs"), "sysbox without its word") }
    return 0
}

/// Whether `word`'s bytes occur in `bytes`. (`String.contains` compares characters: a
/// combining mark after the word's last letter hides it there, not from the readers.)
private func has(_ bytes: [UInt8], _ word: String) -> Bool {
    bytes.firstRange(of: Array(word.utf8)) != nil
}

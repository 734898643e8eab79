import HostStats

/// go-sysinfo's `/proc/meminfo` reader (HostStats' `HostProcFiles.memory`): any bytes give
/// figures or `separator ':' not found`, never a trap; a file without `MemTotal` has a zero
/// total; the figures do not depend on lines without those keys.
public func fuzzProcMeminfo(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let bytes = input.rest()
    switch HostProcFiles.memory(bytes) {
    case .success(let memory):
        let text = String(decoding: bytes, as: UTF8.self)
        if !text.contains("MemTotal") { require(memory.total == 0, "a total without MemTotal") }
        // Appending an unrelated well-formed line changes nothing.
        let more = HostProcFiles.memory(bytes + Array("\nUnrelated: 5 kB\n".utf8))
        require((try? more.get()) == memory, "an unrelated line changed the figures")
    case .failure(let error):
        require(error.description == "separator ':' not found", "\(error)")
    }
    return 0
}

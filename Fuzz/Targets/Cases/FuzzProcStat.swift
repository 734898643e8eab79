import HostStats

/// procfs's `/proc/stat` reader as the host CPU uses it (HostStats'
/// `HostProcFiles.cpuTimes`): any bytes give CPU times or procfs's error, never a trap; an
/// error is procfs's `Error Parsing File`; the times come from a `cpu` line only.
public func fuzzProcStat(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let bytes = input.rest()
    switch HostProcFiles.cpuTimes(bytes) {
    case .success(let times):
        if times.total != 0 || times.idle != 0 {
            require(String(decoding: bytes, as: UTF8.self).contains("cpu"), "times without a cpu line")
        }
    case .failure(let error):
        require(error.description.hasPrefix("Error Parsing File: couldn't parse "), "\(error)")
    }
    return 0
}

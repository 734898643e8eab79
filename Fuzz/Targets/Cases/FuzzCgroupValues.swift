import HostStats

/// clistat's three cgroup file readers (HostStats' `CgroupValues`: whole file, one field of
/// a separated line, a prefixed line of `memory.stat`): any bytes give a value or the
/// reference's error, never a trap; a value read back from its own decimal text is the
/// same; an error names the file or the line it could not use.
public func fuzzCgroupValues(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let separator = input.byte()
    let index = input.int(in: 0...3)
    let prefix = String(decoding: input.data(maxLength: 16), as: UTF8.self)
    let bytes = input.rest()
    let path = "/sys/fs/cgroup/x"

    switch CgroupValues.int64(bytes, path: path) {
    case .success(let value):
        require(try! CgroupValues.int64(Array(String(value).utf8), path: path).get() == value, "\(value) does not read back")
    case .failure(let error):
        require(error.description.hasPrefix("parse \(path): strconv.ParseInt: parsing "), "\(error)")
    }
    switch CgroupValues.int64(bytes, path: path, separator: separator, index: index) {
    case .success(let value):
        let fields = bytes.split(separator: separator, omittingEmptySubsequences: false)
        require(index < fields.count, "field \(index) of \(fields.count) read as \(value)")
    case .failure(let error):
        let text = error.description
        require(text.hasPrefix("parse \(path): ") || text.hasPrefix("expected line "), text)
    }
    switch CgroupValues.int64(bytes, path: path, prefix: prefix) {
    case .success(let value):
        require(bytes.count >= String(value).utf8.count, "\(value) from \(bytes.count) bytes")
    case .failure(let error):
        require(error.description.hasPrefix("parse \(path): "), "\(error)")
    }
    return 0
}

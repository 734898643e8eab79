#if canImport(Glibc)
import Glibc
#endif

/// Writes test fixtures without `fsync`. Foundation's `Data.write(to:)` and
/// `String.write(toFile:)` fsync every file on Linux, which on a busy disk holds one of the
/// two cooperative threads for as long as the disk takes and stalls every test around it.
public enum TestFile {
    public struct WriteError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Writes `bytes` to `path` (created 0644 or truncated); `atomically` writes a sibling
    /// temporary file and renames it over `path`, as an editor's save does.
    public static func write(_ path: String, _ bytes: some Sequence<UInt8>, atomically: Bool = false) throws(WriteError) {
        let target = atomically ? path + ".tmp-\(getpid())-\(UInt32.random(in: .min ... .max))" : path
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw WriteError(description: "open \(target): \(String(cString: strerror(errno)))") }
        let data = Array(bytes)
        var offset = 0
        while offset < data.count {
            let n = data[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                throw WriteError(description: "write \(target): \(reason)")
            }
            offset += n
        }
        close(fd)
        if atomically, rename(target, path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(target)
            throw WriteError(description: "rename to \(path): \(reason)")
        }
    }

    /// Writes `text` as UTF-8.
    public static func write(_ path: String, _ text: String, atomically: Bool = false) throws(WriteError) {
        try write(path, text.utf8, atomically: atomically)
    }
}

import AgentCore
import AgentHTTP
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// An open regular file and what `fstat` said of it when it was measured (and hashed): the
/// read-file body is streamed from this descriptor, never from a second open of the path,
/// so the head's length, hash and mtime describe the bytes sent even when the path is
/// renamed over meanwhile (an editor's atomic save). The descriptor is closed when the last
/// reference goes, so an abandoned response leaks nothing.
final class FileSnapshot: Sendable {
    let descriptor: Int32
    let path: String
    /// The size and mtime the head reported; a later `fstat` that differs means the file
    /// was written in place meanwhile.
    let size: Int
    let mtime: Int64

    /// Takes ownership of `file`'s descriptor.
    init(_ file: consuming RegularFile, path: String) {
        size = file.size
        mtime = ContentHash.mtime(file.info)
        self.path = path
        descriptor = file.releaseDescriptor()
    }

    deinit { close(descriptor) }

    /// Whether the file still has the size and mtime it was measured with. A rename over
    /// the path or an unlink does not change them (the bytes under the descriptor stay);
    /// a write or truncate in place does, unless it lands within the file system's
    /// timestamp granularity and keeps the size.
    func isUnchanged() throws(FileSystemError) -> Bool {
        var now = stat()
        guard fstat(descriptor, &now) == 0 else { throw FileSystemError.last("stat", path) }
        return Int(now.st_size) == size && ContentHash.mtime(now) == mtime
    }

    /// Exactly `count` bytes from `offset`; a file that ends earlier (it shrank) or that
    /// changed while they were read is a failure (`changed`).
    func read(_ count: Int, at offset: Int) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(count)
        while buffer.readableBytes < count {
            let want = count - buffer.readableBytes
            let at = offset + buffer.readableBytes
            var failure: Int32 = 0
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                let n = pread(descriptor, raw.baseAddress, want, off_t(at))
                if n < 0 { failure = errno }
                return max(0, n)
            }
            if failure == EINTR { continue }
            guard failure == 0 else { throw FileSystemError(operation: "read", path: path, code: failure) }
            guard n > 0 else { throw Changed(path: path) }
        }
        guard try isUnchanged() else { throw Changed(path: path) }
        return buffer
    }

    /// The file was written in place while it was read.
    struct Changed: Error, CustomStringConvertible {
        var path: String
        var description: String { "read \(path): the file changed while it was read" }
    }
}

import Foundation
import Glibc
import Testing

/// A real 64 KiB tmpfs mounted on a fresh directory (the tests run as root), so that the
/// state directory's disk can be filled and freed. ``remove()`` detaches it even while
/// files on it are still open, then removes the directory.
final class SmallDisk {
    let path: String
    private var mounted = false

    init(bytes: Int = 64 << 10) throws {
        path = NSTemporaryDirectory() + "agent-small-disk-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(bytes),mode=0700") == 0 else {
            let code = errno
            rmdir(path)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EPERM)
        }
        mounted = true
    }

    /// Writes a filler file until the disk refuses more (ENOSPC); returns its size.
    @discardableResult
    func fill() throws -> Int {
        let fd = open(path + "/filler", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0, count: 512)
        var total = 0
        // A 64 KiB disk takes at most 128 chunks; the bound only guards a disk that never fills.
        for _ in 0..<100_000 {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            total += n
        }
        // The last partial page too: single bytes until nothing fits.
        for _ in 0..<4096 {
            var byte: UInt8 = 0
            guard write(fd, &byte, 1) == 1 else { break }
            total += 1
        }
        return total
    }

    /// Removes the filler: the disk has room again.
    func free() {
        unlink(path + "/filler")
    }

    /// Detaches the tmpfs (lazily: open files do not keep it from going) and removes the
    /// mount point. Safe to call more than once.
    func remove() {
        if mounted {
            _ = umount2(path, Int32(MNT_DETACH))
            mounted = false
        }
        rmdir(path)
    }

    deinit { remove() }
}

import AgentCore
import Glibc

/// One Linux inotify instance: add and remove directory watches, read what happened.
/// Owned by the one thread that reads it (``TreeWatchEngine``).
final class Inotify {
    struct Event {
        var descriptor: Int32
        var mask: UInt32
        /// The entry's name inside the watched directory; "" for the directory itself.
        var name: String
        /// The name was not UTF-8 (shown with replacement characters).
        var lossy = false
    }

    /// What every watched directory reports: entries created, deleted, moved, written or
    /// chmod-ed, and the directory itself going away. Symlinks are not followed.
    static let directoryMask: UInt32 =
        UInt32(IN_CREATE) | UInt32(IN_DELETE) | UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_ATTRIB)
        | UInt32(IN_MOVED_FROM) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)
        | UInt32(IN_ONLYDIR) | UInt32(IN_DONT_FOLLOW) | UInt32(IN_EXCL_UNLINK)

    let descriptor: Int32
    /// Reused for every read: 64 KiB holds at least 256 events (the bound per read).
    private var buffer = [UInt8](repeating: 0, count: 64 << 10)

    init() throws(SystemCallError) {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw SystemCallError(call: "inotify_init1", errno: errno) }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// The watch descriptor for `path`, or the errno (ENOSPC: the user's watch limit).
    func add(_ path: String) -> Result<Int32, SystemCallError> {
        let wd = inotify_add_watch(descriptor, path, Self.directoryMask)
        return wd >= 0 ? .success(wd) : .failure(SystemCallError(call: "inotify_add_watch", errno: errno))
    }

    func remove(_ wd: Int32) {
        _ = inotify_rm_watch(descriptor, wd)
    }

    /// Everything queued now (non-blocking); empty when nothing is.
    func read() -> [Event] {
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return [] }
        var events: [Event] = []
        buffer.withUnsafeBytes { raw in
            var offset = 0
            let header = 16  // wd, mask, cookie, len: four 32-bit fields
            while offset + header <= count {
                let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                guard offset + header + length <= count else { break }
                let nameBytes = raw[(offset + header)..<(offset + header + length)]
                let bytes = nameBytes.prefix { $0 != 0 }
                let name = String(decoding: bytes, as: UTF8.self)
                events.append(Event(descriptor: wd, mask: mask, name: name, lossy: !name.utf8.elementsEqual(bytes)))
                offset += header + length
            }
        }
        return events
    }
}

extension Inotify.Event {
    func has(_ flag: Int32) -> Bool { mask & UInt32(flag) != 0 }
    func has(_ flag: UInt32) -> Bool { mask & flag != 0 }
}

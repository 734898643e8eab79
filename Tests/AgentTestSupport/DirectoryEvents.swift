#if canImport(Glibc)
import Glibc
#endif

/// Records what happens to the entries of one directory (Linux inotify), so a test can tell
/// how a file came to be there: created in place (`IN_CREATE`) or renamed in
/// (`IN_MOVED_TO`). Reads never block.
public final class DirectoryEvents {
    public struct Event: Equatable, Sendable {
        public var name: String
        public var mask: UInt32
        public var isCreate: Bool { mask & UInt32(IN_CREATE) != 0 }
        public var isMovedIn: Bool { mask & UInt32(IN_MOVED_TO) != 0 }
    }

    private let fd: Int32

    /// Watches `directory` for entries created and moved in; nil if inotify is unavailable.
    public init?(_ directory: String) {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, directory, UInt32(IN_CREATE) | UInt32(IN_MOVED_TO)) >= 0 else {
            close(fd)
            return nil
        }
    }

    deinit { close(fd) }

    /// Every event queued so far (at most 64 KiB of them per call).
    public func drain() -> [Event] {
        var events: [Event] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return events }
        var offset = 0
        let header = 16  // wd, mask, cookie, len: four 32-bit fields
        while offset + header <= count {
            func field(_ at: Int) -> UInt32 {
                UInt32(buffer[offset + at]) | UInt32(buffer[offset + at + 1]) << 8 | UInt32(buffer[offset + at + 2]) << 16
                    | UInt32(buffer[offset + at + 3]) << 24
            }
            let mask = field(4)
            let length = Int(field(12))
            let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
            events.append(Event(name: String(decoding: nameBytes, as: UTF8.self), mask: mask))
            offset += header + length
        }
        return events
    }
}

import Glibc
import Synchronization

/// Watches a set of directories with inotify on one thread of its own and calls `onChange`
/// after a burst of relevant events (as its owner's `isRelevant` decides) has been quiet for
/// the debounce delay (250 ms, trailing), or 1 s after the burst's first event under churn
/// (``TrailingDebounce``). Nothing is polled.
///
/// ``watch(_:)`` replaces the watched set synchronously, so a change made after it returns
/// is seen. Bounded: at most ``maxWatches`` directories; past them, or when the kernel's
/// per-user limit is reached, the set is partial and ``problem`` says so.
public final class DirectoryWatcher: Sendable {
    /// Directories watched at most (well under the kernel's usual per-user limit, which
    /// other tools in the workspace share).
    public static let defaultMaxWatches = 1024

    private struct Shared {
        var inotify: Int32 = -1
        var wake: Int32 = -1
        var watched: [String: Int32] = [:]
        var problem: String?
        var initProblem: String?
        var stopped = false
    }

    /// A test seam: a kernel failure injected instead of exhausting the host's inotify limits.
    public enum Fault: Sendable, Equatable {
        /// `inotify_init1` fails with this errno (EMFILE: the per-user instance limit).
        case initialization(Int32)
        /// Every `inotify_add_watch` fails with this errno (ENOSPC: the per-user watch limit).
        case addWatch(Int32)
    }

    /// Whether one event (its inotify mask and the entry's name) asks for `onChange`.
    public typealias Relevance = @Sendable (_ mask: UInt32, _ name: String) -> Bool

    /// Names the thread and starts the watch-limit problem text.
    public let name: String
    public let maxWatches: Int
    private let delay: Duration
    private let fault: Fault?
    private let shared = Mutex(Shared())
    private let isRelevant: Relevance
    private let onChange: @Sendable () -> Void

    public init(
        name: String, maxWatches: Int = DirectoryWatcher.defaultMaxWatches, delay: Duration = TrailingDebounce.standardDelay,
        fault: Fault? = nil, isRelevant: @escaping Relevance, onChange: @escaping @Sendable () -> Void
    ) {
        self.name = name
        self.maxWatches = maxWatches
        self.delay = delay
        self.fault = fault
        self.isRelevant = isRelevant
        self.onChange = onChange
    }

    /// What keeps the watch set from being whole (nil when it is).
    public var problem: String? { shared.withLock { $0.initProblem ?? $0.problem } }

    /// Opens inotify and starts the thread; a failure is kept as ``problem``.
    public func start() {
        var injected: Int32?
        if case .initialization(let code) = fault { injected = code }
        let fd = injected == nil ? inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) : -1
        guard fd >= 0 else {
            let error = SystemCallError(call: "inotify_init1", errno: injected ?? errno)
            shared.withLock { $0.initProblem = "inotify init failed: \(error)" }
            return
        }
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        guard socketpair(AF_UNIX, type, 0, &pair) == 0 else {
            let error = SystemCallError(call: "socketpair", errno: errno)
            close(fd)
            shared.withLock { $0.initProblem = "inotify init failed: \(error)" }
            return
        }
        let (wake, wakeWrite) = (pair[0], pair[1])
        let started = shared.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.inotify = fd
            s.wake = wakeWrite
            return true
        }
        guard started else {
            close(fd)
            close(wake)
            close(wakeWrite)
            return
        }
        AgentThread.start(name: name) { [self] in loop(inotify: fd, wake: wake, wakeWrite: wakeWrite) }
    }

    /// Ends the thread (it closes its descriptors).
    public func stop() {
        shared.withLock { s in
            s.stopped = true
            if s.wake >= 0 {
                var one: UInt8 = 1
                _ = Glibc.write(s.wake, &one, 1)
            }
        }
    }

    /// Makes `directories` (in priority order) the watched set: new ones added, gone ones
    /// removed. Returns once the kernel has them.
    public func watch(_ directories: [String]) {
        shared.withLock { s in
            guard s.inotify >= 0 else { return }
            var wanted: [String] = []
            var seen = Set<String>()
            for directory in directories where seen.insert(directory).inserted { wanted.append(directory) }
            var problem: String?
            if wanted.count > maxWatches {
                problem = "\(name): more than \(maxWatches) directories to watch; the rest are not watched"
                wanted.removeSubrange(maxWatches...)
            }
            let keep = Set(wanted)
            for (path, wd) in s.watched where !keep.contains(path) {
                _ = inotify_rm_watch(s.inotify, wd)
                s.watched[path] = nil
            }
            for path in wanted where s.watched[path] == nil {
                var failure: Int32 = 0
                var wd: Int32 = -1
                if case .addWatch(let code) = fault {
                    failure = code
                } else {
                    wd = inotify_add_watch(s.inotify, path, Self.mask)
                    if wd < 0 { failure = errno }
                }
                if wd >= 0 {
                    s.watched[path] = wd
                } else if failure == ENOSPC {
                    problem = "inotify watch limit exceeded (ENOSPC)"
                    break
                }
                // Other failures (the directory went away meanwhile): its parent's event
                // brings a new resolve and a new set.
            }
            s.problem = problem
        }
    }

    /// Directories watched now.
    public var watchedCount: Int { shared.withLock { $0.watched.count } }

    static let mask: UInt32 =
        UInt32(IN_CREATE) | UInt32(IN_DELETE) | UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_ATTRIB)
        | UInt32(IN_MOVED_FROM) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)
        | UInt32(IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)

    /// Creates, deletes and moves, a watched directory going away, and a queue overflow.
    public static let structural: UInt32 =
        UInt32(IN_CREATE) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE_SELF)
        | UInt32(IN_MOVE_SELF) | UInt32(IN_Q_OVERFLOW)

    private func loop(inotify: Int32, wake: Int32, wakeWrite: Int32) {
        var debounce = TrailingDebounce(delay: delay)
        // 64 KiB holds at least 256 events: the bound per read.
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, debounce.pollTimeout(at: .now))
            if ready < 0 && errno != EINTR { break }
            if fds[1].revents != 0 {
                var value: UInt8 = 0
                _ = Glibc.read(wake, &value, 1)
                if shared.withLock({ $0.stopped }) { break }
            }
            if fds[0].revents != 0, readEvents(inotify, into: &buffer) { debounce.event(at: .now) }
            if debounce.fire(at: .now) { onChange() }
        }
        shared.withLock { s in
            s.inotify = -1
            s.wake = -1
            s.watched = [:]
        }
        close(inotify)
        close(wake)
        close(wakeWrite)
    }

    /// Reads what is queued; true when any event was relevant.
    private func readEvents(_ fd: Int32, into buffer: inout [UInt8]) -> Bool {
        var relevant = false
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return relevant }
            buffer.withUnsafeBytes { raw in
                var offset = 0
                let header = 16  // wd, mask, cookie, len: four 32-bit fields
                while offset + header <= count {
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    guard offset + header + length <= count else { break }
                    let name = String(decoding: raw[(offset + header)..<(offset + header + length)].prefix { $0 != 0 }, as: UTF8.self)
                    if isRelevant(mask, name) { relevant = true }
                    offset += header + length
                }
            }
        }
    }
}

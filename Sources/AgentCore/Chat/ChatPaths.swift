import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The absolute paths each chat's tool calls touched (a process's working directory, a file
/// it edited), so that the git watcher can find the repositories a chat works in.
///
/// Created once by the executable and shared by the modules that record or read paths.
/// Bounded: at most ``maxChats`` chats (the one touched longest ago is forgotten first) and
/// ``maxPathsPerChat`` paths per chat (its oldest path goes first); each subscriber buffers
/// at most ``subscriberBuffer`` unread arrivals (older ones are dropped: a subscriber that
/// wants everything reads ``paths(chat:)`` again).
public final class ChatPaths: Sendable {
    public let maxChats: Int
    public let maxPathsPerChat: Int
    public static let subscriberBuffer = 64
    /// Subscribers per chat (further subscriptions finish at once).
    public static let maxSubscribersPerChat = 16

    private struct Chat {
        /// In arrival order; a path recorded again moves to the end.
        var paths: [String] = []
        /// The same paths, for a membership test that does not scan ``paths``.
        var known: Set<String> = []
        var lastTouched: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<String>.Continuation] = [:]

        /// Smallest goes first when room is needed: watched-only chats, then by age.
        var evictionOrder: (Int, UInt64) { (paths.isEmpty ? 0 : 1, lastTouched) }
    }

    private struct State {
        var chats: [String: Chat] = [:]
        var clock: UInt64 = 0
        var nextSubscriber: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Notified on every change (the journal that persists the store waits on it).
    public let changes = WorkSignal()

    public init(maxChats: Int = 1024, maxPathsPerChat: Int = 256) {
        precondition(maxChats > 0 && maxPathsPerChat > 0)
        self.maxChats = maxChats
        self.maxPathsPerChat = maxPathsPerChat
    }

    /// Records that `chat` touched `path` (absolute; standardised, so `/a/./b/../c` is
    /// `/a/c`; anything else is ignored) and tells that chat's subscribers.
    public func record(_ path: String, chat: String) {
        guard path.hasPrefix("/") else { return }
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        // Continuations are finished and fed outside the lock: finishing one runs its
        // termination handler, which takes the lock.
        var forgotten: [AsyncStream<String>.Continuation] = []
        let subscribers = state.withLock { s -> [AsyncStream<String>.Continuation] in
            s.clock += 1
            // Room for a new chat: a chat that is only watched (no paths) goes before any
            // chat with paths, else the one touched longest ago.
            if s.chats[chat] == nil, s.chats.count >= maxChats,
                let oldest = s.chats.min(by: { $0.value.evictionOrder < $1.value.evictionOrder })?.key
            {
                forgotten = Array(s.chats[oldest]!.subscribers.values)
                s.chats[oldest] = nil
            }
            let clock = s.clock
            return Self.touch(&s.chats[chat, default: Chat()], absolute, at: clock, keeping: maxPathsPerChat)
        }
        for continuation in forgotten { continuation.finish() }
        for continuation in subscribers { continuation.yield(absolute) }
        changes.notify()
    }

    /// Moves or adds `path` at the end of the chat's paths (in place: the paths are not
    /// copied) and returns the chat's subscribers.
    private static func touch(
        _ entry: inout Chat, _ path: String, at clock: UInt64, keeping limit: Int
    ) -> [AsyncStream<String>.Continuation] {
        entry.lastTouched = clock
        if !entry.known.insert(path).inserted, let index = entry.paths.firstIndex(of: path) {
            entry.paths.remove(at: index)
        }
        entry.paths.append(path)
        if entry.paths.count > limit {
            let dropped = entry.paths.count - limit
            for old in entry.paths[..<dropped] { entry.known.remove(old) }
            entry.paths.removeFirst(dropped)
        }
        return Array(entry.subscribers.values)
    }

    /// Every chat and its paths, the chat touched longest ago first (so that recording
    /// them again in this order rebuilds the same store).
    public func snapshot() -> [(chat: String, paths: [String])] {
        state.withLock { s in
            s.chats.filter { !$0.value.paths.isEmpty }
                .sorted { $0.value.lastTouched < $1.value.lastTouched }
                .map { ($0.key, $0.value.paths) }
        }
    }

    /// The chat's paths, oldest first.
    public func paths(chat: String) -> [String] {
        state.withLock { $0.chats[chat]?.paths ?? [] }
    }

    /// Chats known (with paths or subscribers).
    public var chatCount: Int { state.withLock { $0.chats.count } }

    /// Subscribers of `chat` now (diagnostics and tests).
    public func subscriberCount(chat: String) -> Int { state.withLock { $0.chats[chat]?.subscribers.count ?? 0 } }

    /// Paths as they arrive for `chat` (not those recorded before). The stream finishes when
    /// the chat is forgotten; cancelling its consumer unsubscribes.
    public func arrivals(chat: String) -> AsyncStream<String> {
        if let stream = arrivalsIfRoom(chat: chat) { return stream }
        let (stream, continuation) = AsyncStream<String>.makeStream()
        continuation.finish()
        return stream
    }

    /// As ``arrivals(chat:)``, or nil when the chat already has
    /// ``maxSubscribersPerChat`` subscribers (so a caller can say why it stops).
    public func arrivalsIfRoom(chat: String) -> AsyncStream<String>? {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(Self.subscriberBuffer))
        let id = state.withLock { s -> UInt64? in
            var entry = s.chats[chat] ?? Chat()
            guard entry.subscribers.count < Self.maxSubscribersPerChat else { return nil }
            s.nextSubscriber += 1
            s.clock += 1
            entry.lastTouched = max(entry.lastTouched, s.clock)
            entry.subscribers[s.nextSubscriber] = continuation
            s.chats[chat] = entry
            return s.nextSubscriber
        }
        guard let id else {
            continuation.finish()
            return nil
        }
        // Set after registration, outside the lock; a stream finished meanwhile runs it at once.
        // A chat that was only watched (no paths) is forgotten with its last subscriber, so
        // watching unknown chats cannot push out chats with paths.
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { s in
                guard var entry = s.chats[chat], entry.subscribers.removeValue(forKey: id) != nil else { return }
                s.chats[chat] = entry.paths.isEmpty && entry.subscribers.isEmpty ? nil : entry
            }
        }
        return stream
    }
}

import NIOCore
import NIOHTTP1
import Synchronization

/// A client's kept-alive connections between requests: at most ``maxIdle`` (the oldest
/// closes first), each closed after ``idleTimeout`` from the end of its last answer, or when
/// the server closes it (its ``AnswerStreamHandler`` keeps reading while idle). A request
/// takes the one that waited least (the likeliest still open), for its own origin, and never
/// one that is closed or closing. `closeAll` and `deinit` close what is left.
///
/// A server closing an idle connection as a request goes out on it fails that request: the
/// idle timeout is short (1 s by default, well below the 2 s of gunicorn, the shortest
/// common server default), and shorter still when the server says so
/// (`Keep-Alive: timeout=N`).
final class ConnectionPool: Sendable {
    /// Which requests may share a connection: the target and the route's TLS.
    struct Key: Hashable, Sendable {
        let secure: Bool
        let host: String
        let port: Int
    }

    let maxIdle: Int
    let idleTimeout: TimeAmount

    private struct Idle {
        let key: Key
        let connection: OpenConnection
        /// When it closes unless taken first.
        let end: NIODeadline
    }
    private let idle = Mutex<[Idle]>([])

    init(maxIdle: Int, idleTimeout: TimeAmount) {
        self.maxIdle = maxIdle
        self.idleTimeout = idleTimeout
    }

    deinit {
        closeAll()
    }

    /// Closes every idle connection.
    func closeAll() {
        for entry in idle.withLock({ list in
            defer { list = [] }; return list
        }) { entry.connection.channel.close(promise: nil) }
    }

    /// An open idle connection to `key`, no longer idle; nil if none. (No timer is touched:
    /// the connection's idle timer, if it fires while the connection is in use, stops.)
    func take(_ key: Key) -> OpenConnection? {
        idle.withLock { list -> OpenConnection? in
            list.removeAll { !$0.connection.usable }
            guard let index = list.lastIndex(where: { $0.key == key && NIODeadline.now() < $0.end }) else { return nil }
            return list.remove(at: index).connection
        }
    }

    /// Keeps `connection` for the next request to `key` for the idle timeout, or the
    /// server's `Keep-Alive: timeout` less a second if shorter, from `since` (when its answer
    /// arrived whole).
    func put(_ key: Key, _ connection: OpenConnection, answer: HTTPHeaders, since: NIODeadline) {
        var timeout = idleTimeout
        if let seconds = Self.keepAliveTimeout(answer) { timeout = min(timeout, .seconds(Int64(seconds) - 1)) }
        let end = since + timeout
        guard maxIdle > 0, NIODeadline.now() < end, connection.usable else {
            connection.channel.close(promise: nil)
            return
        }
        let (evicted, arm) = idle.withLock { list -> ([Idle], Bool) in
            list.removeAll { !$0.connection.usable }
            list.append(Idle(key: key, connection: connection, end: end))
            // One timer per connection, set when it first waits and kept while it is reused
            // before it fires (scheduling from here would wake the loop's thread each time);
            // another only for an earlier end than the one it was set for.
            let armed = connection.idleTimer.until.load(ordering: .relaxed)
            let arm = armed == 0 || end.uptimeNanoseconds < armed
            if arm { connection.idleTimer.until.store(end.uptimeNanoseconds, ordering: .relaxed) }
            guard list.count > maxIdle else { return ([], arm) }
            let evicted = Array(list.prefix(list.count - maxIdle))
            list.removeFirst(list.count - maxIdle)
            return (evicted, arm)
        }
        for entry in evicted { entry.connection.channel.close(promise: nil) }
        if arm { schedule(connection, at: end) }
    }

    /// At `deadline`, on the connection's loop: closes it if it has waited its time, waits
    /// again if it was reused and waits anew, stops if it is in use (its next wait sets it
    /// again).
    private func schedule(_ connection: OpenConnection, at deadline: NIODeadline) {
        let channel = connection.channel
        channel.eventLoop.scheduleTask(deadline: deadline) { [weak self] in
            guard let self else { return }
            let (expired, again) = idle.withLock { list -> (Bool, NIODeadline?) in
                guard let index = list.firstIndex(where: { $0.connection.channel === channel }) else {
                    connection.idleTimer.until.store(0, ordering: .relaxed)
                    return (false, nil)
                }
                let end = list[index].end
                guard NIODeadline.now() >= end else {
                    connection.idleTimer.until.store(end.uptimeNanoseconds, ordering: .relaxed)
                    return (false, end)
                }
                list.remove(at: index)
                connection.idleTimer.until.store(0, ordering: .relaxed)
                return (true, nil)
            }
            if expired { channel.close(promise: nil) }
            if let again { schedule(connection, at: again) }
        }
    }

    /// Connections waiting and still open (tests).
    var idleCount: Int { idle.withLock { list in list.count { $0.connection.usable } } }

    /// `Keep-Alive: timeout=N` (seconds), if the answer has it.
    static func keepAliveTimeout(_ headers: HTTPHeaders) -> Int? {
        for value in headers["keep-alive"] {
            for parameter in value.split(separator: ",") {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.filter { !$0.isWhitespace } }
                if pair.count == 2, pair[0].lowercased() == "timeout", let seconds = Int(pair[1]), seconds >= 0 { return seconds }
            }
        }
        return nil
    }
}

/// A connection and its per-request handlers (used on its event loop only).
struct OpenConnection: Sendable {
    let channel: any Channel
    let handlers: NIOLoopBound<ExchangeHandlers>
    let answer: NIOLoopBound<AnswerStreamHandler>
    /// Set once it began to close.
    let closing: ClosingMark
    /// Its idle timer (read and written under its pool's lock).
    let idleTimer = IdleTimerMark()

    /// Open, and not closing: it may take a request.
    var usable: Bool { channel.isActive && !closing.marked }

    /// Request numbers, unique in the process (a late reader of an earlier request is told
    /// apart from the current one).
    private static let requests = Atomic(0)

    /// Starts a request on the connection, from any thread (its handlers begin on the loop,
    /// without waiting for them): its head's future, its answer's parts, and the mark set
    /// when the answer has arrived whole.
    func start(
        _ parts: [HTTPClientRequestPart], deadline: NIODeadline, headOnly: Bool, expired: @escaping @Sendable () -> Void
    ) -> (EventLoopFuture<HTTPResponseHead>, AnswerStreamHandler.Producer, StreamEnd) {
        let loop = channel.eventLoop
        let generation = Self.requests.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, source, ended) = AnswerStreamHandler.stream(for: answer, generation: generation)
        let promise = loop.makePromise(of: HTTPResponseHead.self)
        let handlers = self.handlers
        let begin: @Sendable () -> Void = {
            let h = handlers.value
            h.answer.begin(source, generation: generation, ended: ended)
            h.head.begin(promise: promise, deadline: deadline, headOnly: headOnly, expired: expired)
            h.writer.begin(parts)
        }
        if loop.inEventLoop { begin() } else { loop.execute(begin) }
        return (promise.futureResult, stream, ended)
    }
}

/// When a connection's idle timer fires (uptime nanoseconds), 0 if it is not set.
final class IdleTimerMark: Sendable {
    let until = Atomic<UInt64>(0)
}

/// The handlers a request starts on its connection: its parts' writer, its head and deadline,
/// its answer's stream.
final class ExchangeHandlers {
    let writer = RequestWriter()
    let head = ResponseHeadHandler()
    let answer = AnswerStreamHandler()
}

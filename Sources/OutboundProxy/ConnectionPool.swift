import NIOCore
import NIOHTTP1
import Synchronization

/// A client's kept-alive connections between requests: at most ``maxIdle`` (the oldest
/// closes first), each closed after ``idleTimeout`` unused or when the server closes it (its
/// ``AnswerStreamHandler`` keeps reading while idle). A request takes the one that waited
/// least (the likeliest still open), for its own origin and never one the server has closed.
/// Its `deinit` closes what is left.
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
        /// When it became idle, and how long it may stay so.
        let since: NIODeadline
        let timeout: TimeAmount
    }
    private let idle = Mutex<[Idle]>([])

    init(maxIdle: Int, idleTimeout: TimeAmount) {
        self.maxIdle = maxIdle
        self.idleTimeout = idleTimeout
    }

    deinit {
        for entry in idle.withLock({ $0 }) { entry.connection.channel.close(promise: nil) }
    }

    /// An open idle connection to `key`, no longer idle; nil if none. (No timer is touched:
    /// the connection's idle timer, if it fires while the connection is in use, stops.)
    func take(_ key: Key) -> OpenConnection? {
        idle.withLock { list -> OpenConnection? in
            list.removeAll { !$0.connection.channel.isActive }
            guard let index = list.lastIndex(where: { $0.key == key }) else { return nil }
            return list.remove(at: index).connection
        }
    }

    /// Keeps `connection` for the next request to `key`, for the idle timeout or the
    /// server's `Keep-Alive: timeout` (less a second), whichever is shorter.
    func put(_ key: Key, _ connection: OpenConnection, answer: HTTPHeaders) {
        var timeout = idleTimeout
        if let seconds = Self.keepAliveTimeout(answer) { timeout = min(timeout, .seconds(Int64(seconds) - 1)) }
        guard timeout > .zero, maxIdle > 0, connection.channel.isActive else {
            connection.channel.close(promise: nil)
            return
        }
        let now = NIODeadline.now()
        let (evicted, arm) = idle.withLock { list -> ([Idle], Bool) in
            list.append(Idle(key: key, connection: connection, since: now, timeout: timeout))
            // One timer per connection, armed when it first waits and kept while it is reused
            // before it fires (scheduling from here would wake the loop's thread each time).
            let arm = !connection.idleTimer.armed.exchange(true, ordering: .relaxed)
            guard list.count > maxIdle else { return ([], arm) }
            let evicted = Array(list.prefix(list.count - maxIdle))
            list.removeFirst(list.count - maxIdle)
            return (evicted, arm)
        }
        for entry in evicted { entry.connection.channel.close(promise: nil) }
        if arm { schedule(connection, at: now + timeout) }
    }

    /// At `deadline`, on the connection's loop: closes it if it has waited its time, waits
    /// again if it was reused and waits anew, stops if it is in use (its next wait arms it).
    private func schedule(_ connection: OpenConnection, at deadline: NIODeadline) {
        let channel = connection.channel
        channel.eventLoop.scheduleTask(deadline: deadline) { [weak self] in
            guard let self else { return }
            let now = NIODeadline.now()
            let (expired, again) = idle.withLock { list -> (Bool, NIODeadline?) in
                guard let index = list.firstIndex(where: { $0.connection.channel === channel }) else {
                    connection.idleTimer.armed.store(false, ordering: .relaxed)
                    return (false, nil)
                }
                let end = list[index].since + list[index].timeout
                guard now >= end else { return (false, end) }
                list.remove(at: index)
                connection.idleTimer.armed.store(false, ordering: .relaxed)
                return (true, nil)
            }
            if expired { channel.close(promise: nil) }
            if let again { schedule(connection, at: again) }
        }
    }

    /// Connections waiting and still open (tests).
    var idleCount: Int { idle.withLock { list in list.count { $0.connection.channel.isActive } } }

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
    /// Whether its idle timer is set (read and written under its pool's lock).
    let idleTimer = IdleTimerMark()

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

/// Whether a connection's idle timer is set.
final class IdleTimerMark: Sendable {
    let armed = Atomic(false)
}

/// The handlers a request starts on its connection: its parts' writer, its head and deadline,
/// its answer's stream.
final class ExchangeHandlers {
    let writer = RequestWriter()
    let head = ResponseHeadHandler()
    let answer = AnswerStreamHandler()
}

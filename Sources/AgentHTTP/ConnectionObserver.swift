import AgentCore
import NIOCore
import NIOHTTP1
import Synchronization

/// Watches a connection for the client going away (half-close, close or error), and tells
/// the requests waiting on it (``AgentRequestContext/clientGone``).
///
/// Every HTTP/1 connection's ``HTTP1ConnectionHandler`` holds one and reports the input's end
/// and errors to it (not a handler of its own: one pipeline step less for every read); it
/// follows the channel's close itself, also after a WebSocket upgrade took the handler out.
/// Memory: one entry per registration, removed
/// when its wait ends; requests on a connection run one at a time, so normally one entry.
/// (Chaining a future onto one per-connection promise instead kept three futures per
/// `wait=true` request until the connection closed: 200 000 waits on one keep-alive
/// connection grew the agent by 70 MB.)
final class ConnectionObserver: GoneSignal {
    private struct Waiters {
        var gone = false
        /// Why the input broke, when the decoder could not parse it (nil: it did not).
        var malformed: String?
        var nextID: UInt64 = 0
        var actions: [UInt64: @Sendable () -> Void] = [:]
    }
    private let waiters = Mutex(Waiters())

    /// An observer of `channel`: gone at its close, and at the input's end or an error its
    /// connection handler reports.
    init(watching channel: any Channel) {
        channel.closeFuture.whenComplete { [self] _ in markGone() }
    }

    /// Registrations not yet run or cancelled.
    var registrationCount: Int { waiters.withLock { $0.actions.count } }

    func whenGone(_ action: @escaping @Sendable () -> Void) -> GoneRegistration {
        let id = waiters.withLock { w -> UInt64? in
            if w.gone { return nil }
            w.nextID &+= 1
            w.actions[w.nextID] = action
            return w.nextID
        }
        guard let id else {
            action()
            return .none
        }
        return GoneRegistration { [weak self] in
            self?.waiters.withLock { _ = $0.actions.removeValue(forKey: id) }
        }
    }

    /// The client has gone: every registered action runs, once.
    private func markGone() {
        let actions = waiters.withLock { w -> [@Sendable () -> Void] in
            guard !w.gone else { return [] }
            w.gone = true
            defer { w.actions.removeAll() }
            return Array(w.actions.values)
        }
        for action in actions { action() }
    }

    /// The client half-closed (`ChannelEvent.inputClosed`).
    func inputClosed() { markGone() }

    /// The decoder's words when the connection's input could not be parsed: a request cut
    /// short by it (its body reader, or a wait cancelled with it) answers 400, not 503.
    var malformedInput: String? { waiters.withLock { $0.malformed } }

    /// The connection's pipeline caught `error`: the client counts as gone. Input that ended
    /// inside a request (a half-close) is not malformed: its body reader answers "incomplete".
    func errorCaught(_ error: any Error) {
        if (error as? HTTPParserError) != .invalidEOFState, error is HTTPParserError || error is ByteToMessageDecoderError {
            let detail = HTTP1ConnectionHandler.describe(error)
            waiters.withLock { if $0.malformed == nil { $0.malformed = detail } }
        }
        markGone()
    }
}

import AgentCore
import CoreMetrics
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import NIOCore
import NIOWebSocket
import Synchronization

/// `GET /api/v0/processes/{id}/stream`: a WebSocket carrying a process's output.
///
/// Protocol (server to client):
/// 1. the retained output so far: head bytes, an `omitted` event if the middle is gone,
///    tail bytes;
/// 2. live output as binary messages (up to 64 KiB each, one frame each), in write order;
/// 3. a text message `{"type":"exit","exit_code":N,"exit_signal"?:"SIG..."}`, then a
///    normal close.
/// Text `{"type":"omitted","omitted_bytes":N}` marks bytes this client will not get: the
/// head/tail gap, or output dropped because the client read too slowly (see
/// ``OutputSubscription``). Messages from the client are read and ignored.
///
/// A client cannot hold a connection (or the agent's shutdown) up: one that accepts no
/// data for ``ProcessManager/Configuration/subscriberStallTimeout`` (1 s once shutdown
/// has begun) is disconnected, and one that does not answer the final close frame within
/// ``closeReplyTimeout`` is dropped.
struct ProcessStream: Sendable {
    let manager: ProcessManager

    /// How long a client has to answer the server's close frame.
    static let closeReplyTimeout: Duration = .seconds(2)
    /// Stall limit once the agent is shutting down.
    static let shutdownStallTimeout: Duration = .seconds(1)

    func route(path: String) -> AgentWebSocketRoute {
        AgentWebSocketRoute(path: path) { request throws(APIError) in
            _ = try admit(request)
        } handler: { inbound, outbound, context in
            let request = WebSocketRouteRequest(
                headers: context.request.headers, parameters: context.requestContext.parameters.rawParameters)
            guard let process = try? admit(request) else { return }
            try await stream(process, inbound: inbound, outbound: outbound, channel: context.requestContext.channel)
        }
    }

    /// The process to stream, or the reason there is none: 400 for a malformed chat
    /// header, 404 for an unknown or foreign id, 429 when subscribers are full.
    func admit(_ request: WebSocketRouteRequest) throws(APIError) -> ManagedProcess {
        let chat = try ChatIdentityMiddleware.chat(request.headers)
        let id = ProcessRoutes.processID(request.parameters["id"] ?? "")
        guard let process = manager.lookup(id, chat: chat) else { throw ProcessRoutes.notFound(id) }
        if process.subscriberCount >= ManagedProcess.maxSubscribers || manager.subscriberBudget.usage.subscribers >= manager.subscriberBudget.maxSubscribers {
            throw Self.tooMany(manager)
        }
        return process
    }

    static func tooMany(_ manager: ProcessManager) -> APIError {
        APIError(
            .tooManyRequests, "Too many stream subscribers.",
            detail: "At most \(ManagedProcess.maxSubscribers) per process and \(manager.subscriberBudget.maxSubscribers) in all.")
    }

    func stream(
        _ process: ManagedProcess, inbound: WebSocketInbound, outbound: WebSocketOutbound, channel: any Channel
    ) async throws {
        let (head, omitted, tail, subscription): ([UInt8], Int, [UInt8], OutputSubscription)
        do {
            (head, omitted, tail, subscription) = try process.subscribe()
        } catch {
            try await outbound.close(.policyViolation, reason: "too many subscribers")
            return
        }
        defer { process.unsubscribe(subscription) }
        let progress = WriteProgress()
        let manager = self.manager
        // The sender ends the stream with a close frame, and the reader ends when the
        // client answers it (or leaves first, which stops the sender).
        enum Finished { case reader, sender, closeTimeout, stalled, monitorEnded }
        try await withThrowingTaskGroup(of: Finished.self) { group in
            group.addTask {
                await Self.readInput(inbound, into: process, notifying: subscription, timeout: manager.configuration.stdinWriteTimeout)
                subscription.cancel()
                return .reader
            }
            group.addTask {
                let output = WatchedWriter(outbound: outbound, progress: progress, eventLoop: channel.eventLoop)
                if try await Self.send(head: head, omitted: omitted, tail: tail, from: subscription, to: output) {
                    try? await output.close()
                }
                return .sender
            }
            group.addTask {
                // A client that stops reading blocks our writes (back pressure); drop it.
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    let limit = manager.isShuttingDown ? Self.shutdownStallTimeout : manager.configuration.subscriberStallTimeout
                    if let since = progress.writingSince, ContinuousClock.now - since > limit {
                        channel.abort()
                        ProcessMetrics.disconnected("stalled")
                        return .stalled
                    }
                }
                return .monitorEnded
            }
            var readerDone = false
            var senderDone = false
            while let finished = try await group.next() {
                switch finished {
                case .reader: readerDone = true
                case .sender:
                    senderDone = true
                    if !readerDone {
                        group.addTask {
                            try? await Task.sleep(for: Self.closeReplyTimeout)
                            return .closeTimeout
                        }
                    }
                case .closeTimeout:
                    ProcessMetrics.disconnected("close_timeout")
                    channel.close(promise: nil)
                    group.cancelAll()
                case .stalled:
                    group.cancelAll()
                case .monitorEnded:
                    break
                }
                if readerDone && senderDone { group.cancelAll() }
            }
        }
    }

    /// Reads the client's messages: binary ones go to the process's stdin (in order, waiting
    /// while the child does not read, which holds this client's further frames back), text
    /// ones are ignored. A message is written only once it is whole (as the reference's
    /// WebSocket library reads them): one the connection refuses (over 4 MiB, a protocol
    /// error) or that a vanished client leaves unfinished writes nothing. So each stream holds
    /// at most one message, ``WebSocketLimits/maxMessageBytes``, while it is assembled. A
    /// refused write is told to the client as `{"type":"stdin_error","message":...}`, and
    /// its later input is not written.
    static func readInput(
        _ inbound: WebSocketInbound, into process: ManagedProcess, notifying subscription: OutputSubscription, timeout: Duration
    ) async {
        var refused = false
        do {
            for try await message in inbound.messages(maxSize: WebSocketLimits.maxMessageBytes) {
                guard case .binary(let data) = message, !refused, data.readableBytes > 0 else { continue }
                guard let input = process.input else {
                    refused = true
                    subscription.notify(stdinError("The process was not started with stdin."))
                    continue
                }
                switch await input.write(Array(data.readableBytesView), timeout: timeout) {
                case .success(let written):
                    ProcessMetrics.stdinBytes.increment(by: written)
                case .failure(let failure):
                    refused = true
                    subscription.notify(stdinError(ProcessRoutes.inputError(failure, id: process.id).description))
                }
            }
        } catch {
            // The connection refused the message and is closing with its code.
        }
    }

    static func stdinError(_ message: String) -> String {
        let encoded = (try? JSONEncoder().encode(message)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        return #"{"type":"stdin_error","message":\#(encoded)}"#
    }

    /// Sends the retained output, then live events; true once the exit event was sent.
    static func send(
        head: [UInt8], omitted: Int, tail: [UInt8], from subscription: OutputSubscription, to outbound: WatchedWriter
    ) async throws -> Bool {
        if !head.isEmpty { try await outbound.write(.binary(ByteBuffer(bytes: head))) }
        if omitted > 0 { try await outbound.write(.text(omittedEvent(omitted))) }
        if !tail.isEmpty { try await outbound.write(.binary(ByteBuffer(bytes: tail))) }
        while let event = await subscription.next() {
            switch event {
            case .output(let bytes):
                try await outbound.write(.binary(bytes))
            case .omitted(let count):
                try await outbound.write(.text(omittedEvent(count)))
            case .notice(let text):
                try await outbound.write(.text(text))
            case .exit(let status):
                try await outbound.write(.text(exitEvent(status)))
                return true
            }
        }
        return false
    }

    static func omittedEvent(_ count: Int) -> String {
        #"{"type":"omitted","omitted_bytes":\#(count)}"#
    }

    static func exitEvent(_ status: ExitStatus) -> String {
        if let signal = status.signal {
            return #"{"type":"exit","exit_code":\#(status.code),"exit_signal":"\#(signal)"}"#
        }
        return #"{"type":"exit","exit_code":\#(status.code)}"#
    }
}

/// When the write in progress started (nil between writes), read by the stall monitor.
final class WriteProgress: Sendable {
    private let started = Mutex<ContinuousClock.Instant?>(nil)

    var writingSince: ContinuousClock.Instant? { started.withLock { $0 } }

    func track<T>(_ body: () async throws -> T) async rethrows -> T {
        started.withLock { $0 = .now }
        defer { started.withLock { $0 = nil } }
        return try await body()
    }
}

/// The WebSocket writer with each write timed for the stall monitor, and paced by the
/// connection's event loop.
///
/// The session's `write` returns once the frame is handed to NIO's async writer, which learns
/// that the socket is full only when the event loop gets to the frame. On a busy machine a
/// sender could hand over many frames before that, each held in memory. Waiting for one turn
/// of the connection's loop after each write keeps at most one frame in flight beyond NIO's
/// write-buffer watermark, so a subscriber's memory is its queue plus one message.
struct WatchedWriter: Sendable {
    let outbound: WebSocketOutbound
    let progress: WriteProgress
    let eventLoop: any EventLoop

    func write(_ message: WebSocketMessage) async throws {
        try await progress.track {
            try await outbound.write(message)
            try await eventLoop.submit {}.get()
        }
    }

    func close() async throws {
        try await progress.track { try await outbound.close(.normalClosure, reason: nil) }
    }
}

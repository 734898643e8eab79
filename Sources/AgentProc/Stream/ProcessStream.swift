import AgentHTTP
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import NIOWebSocket

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
struct ProcessStream: Sendable {
    let manager: ProcessManager

    func register(on router: Router<AgentRequestContext>, path: String) {
        router.ws(RouterPath(path)) { request, context in
            let chat: ChatIdentity?
            do { chat = try ChatIdentity.from(request.headers) } catch { return .dontUpgrade }
            let id = context.parameters.get("id") ?? ""
            guard let process = manager.lookup(id, chat: chat),
                  process.subscriberCount < ManagedProcess.maxSubscribers
            else { return .dontUpgrade }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            let chat = (try? ChatIdentity.from(context.request.headers)) ?? nil
            let id = context.requestContext.parameters.get("id") ?? ""
            guard let process = manager.lookup(id, chat: chat) else { return }
            try await stream(process, inbound: inbound, outbound: outbound)
        }
    }

    func stream(_ process: ManagedProcess, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        guard let (head, omitted, tail, subscription) = process.subscribe() else {
            try await outbound.close(.policyViolation, reason: "too many subscribers")
            return
        }
        defer {
            subscription.cancel()
            process.unsubscribe(subscription)
        }
        // The reader must never be cancelled: WSCore needs the inbound stream afterwards for
        // the close handshake. So the sender ends the stream with a close frame, and the
        // reader ends when the client answers it (or leaves first, which stops the sender).
        enum Finished { case reader, sender, closeTimeout }
        try await withThrowingTaskGroup(of: Finished.self) { group in
            group.addTask {
                do { for try await _ in inbound {} } catch {}
                subscription.cancel()
                return .reader
            }
            group.addTask {
                if try await Self.send(head: head, omitted: omitted, tail: tail, from: subscription, to: outbound) {
                    try? await outbound.close(.normalClosure, reason: nil)
                }
                return .sender
            }
            var readerDone = false
            var senderDone = false
            while let finished = try await group.next() {
                switch finished {
                case .reader: readerDone = true
                case .sender:
                    senderDone = true
                    if !readerDone {
                        // A client that never answers the close frame gets this long.
                        group.addTask {
                            try? await Task.sleep(for: Self.closeReplyTimeout)
                            return .closeTimeout
                        }
                    }
                case .closeTimeout:
                    group.cancelAll()
                }
                if readerDone && senderDone { group.cancelAll() }
            }
        }
    }

    /// How long a client has to answer the server's close frame.
    static let closeReplyTimeout: Duration = .seconds(10)

    /// Sends the retained output, then live events; true once the exit event was sent.
    static func send(
        head: [UInt8], omitted: Int, tail: [UInt8], from subscription: OutputSubscription,
        to outbound: WebSocketOutboundWriter
    ) async throws -> Bool {
        if !head.isEmpty { try await outbound.write(.binary(ByteBuffer(bytes: head))) }
        if omitted > 0 { try await outbound.write(.text(omittedEvent(omitted))) }
        if !tail.isEmpty { try await outbound.write(.binary(ByteBuffer(bytes: tail))) }
        while let event = await subscription.next() {
            switch event {
            case .output(let bytes):
                try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
            case .omitted(let count):
                try await outbound.write(.text(omittedEvent(count)))
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

import Logging
import NIOCore
import NIOWebSocket
import ServiceLifecycle
import Synchronization

/// Carries out ``WebSocketSessionStateMachine`` over an upgraded connection's frames (NIO's
/// frame codec behind an `NIOAsyncChannel`) and runs the route's handler beside it: one task
/// reads the channel and feeds every frame to the machine, the handler reads the data frames
/// it delivers (``WebSocketInbound``) and writes through ``WebSocketOutbound``.
///
/// When the handler returns the session closes with 1000 (1011 if it threw, the code of a
/// thrown ``WebSocketCloseError``), and ends once the client's close came, its input ended,
/// or the close timeout passed; then the channel closes. At graceful shutdown an open
/// session closes with 1000, as a cancelled one closes its channel.
final class WebSocketSession: Sendable {
    typealias Machine = WebSocketSessionStateMachine<ContinuousClock>
    typealias Handler = @Sendable (WebSocketInbound, WebSocketOutbound) async throws -> Void

    private let machine: Mutex<Machine>
    private let clock = ContinuousClock()
    private let channel: any Channel
    private let outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>
    private let buffer = WebSocketInboundBuffer()

    private init(channel: any Channel, outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>, configuration: Machine.Configuration) {
        self.channel = channel
        self.outbound = outbound
        self.machine = Mutex(Machine(configuration: configuration))
    }

    /// Runs `handler` as the session of `frames` until the session ends, then closes the channel.
    static func run(
        _ frames: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, configuration: Machine.Configuration, logger: Logger,
        handler: Handler
    ) async {
        let channel = frames.channel
        do {
            try await frames.executeThenClose { inbound, outbound in
                let session = WebSocketSession(channel: channel, outbound: outbound, configuration: configuration)
                await withTaskCancellationHandler {
                    await withGracefulShutdownHandler {
                        await withTaskGroup(of: Void.self) { group in
                            group.addTask { await session.read(inbound) }
                            let code: WebSocketErrorCode
                            do {
                                try await handler(WebSocketInbound(buffer: session.buffer), WebSocketOutbound(session: session))
                                code = .normalClosure
                            } catch let error as WebSocketCloseError {
                                code = error.code
                            } catch {
                                logger.debug("WebSocket handler error", metadata: ["error.type": "\(error)"])
                                code = .unexpectedServerError
                            }
                            await session.perform(session.machine.withLock { $0.handlerEnded(code, now: session.clock.now) })
                            // The reader ends with the channel's input: the client's close
                            // or FIN, or the close timer.
                            await group.waitForAll()
                        }
                    } onGracefulShutdown: {
                        Task { await session.close(.normalClosure, reason: nil) }
                    }
                } onCancel: {
                    channel.close(promise: nil)
                }
            }
        } catch {
            logger.debug("WebSocket session error", metadata: ["error.type": "\(error)"])
        }
    }

    // MARK: The route's side

    func write(_ frame: WebSocketFrame) async throws {
        guard machine.withLock({ $0.mayWrite }) else { throw ChannelError.outputClosed }
        try await outbound.write(frame)
    }

    func close(_ code: WebSocketErrorCode, reason: String?) async {
        await perform(machine.withLock { $0.closeRequested(code, reason: reason, now: clock.now) })
    }

    // MARK: Driving the machine

    /// Feeds the client's frames to the machine until the channel's input ends.
    private func read(_ inbound: NIOAsyncChannelInboundStream<WebSocketFrame>) async {
        do {
            for try await frame in inbound {
                let actions = machine.withLock {
                    $0.received(
                        opcode: frame.opcode, fin: frame.fin, reservedBits: !frame.reservedBits.isEmpty, data: frame.unmaskedData,
                        now: clock.now)
                }
                await perform(actions)
            }
        } catch {}
        await perform(machine.withLock { $0.inputClosed() })
    }

    private func perform(_ actions: [Machine.Action]) async {
        for action in actions {
            switch action {
            case .deliver(let frame):
                await buffer.push(frame)
            case .sendPong(let data):
                try? await outbound.write(WebSocketFrame(fin: true, opcode: .pong, data: data))
            case .sendClose(let code, let reason):
                var data = ByteBuffer()
                data.write(webSocketErrorCode: code)
                if let reason { data.writeString(Self.closeReason(reason)) }
                try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))
                // Half-closes our output once the close frame is written.
                outbound.finish()
            default:
                performNow(action)
            }
        }
    }

    /// The actions that need no wait (all a timer's are).
    private func performNow(_ action: Machine.Action) {
        switch action {
        case .finishInbound:
            buffer.finish()
        case .armCloseTimer(let delay):
            let (seconds, attoseconds) = delay.components
            channel.eventLoop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) { [self] in
                for action in machine.withLock({ $0.closeTimerFired(now: clock.now) }) { performNow(action) }
            }
        case .closeChannel:
            channel.close(promise: nil)
        case .deliver, .sendPong, .sendClose:
            break
        }
    }

    /// `reason` cut to what fits a close frame (125 bytes with the code), at a character's end.
    static func closeReason(_ reason: String) -> String {
        var bytes = 0
        var end = reason.startIndex
        for character in reason {
            bytes += character.utf8.count
            if bytes > 123 { break }
            end = reason.index(after: end)
        }
        return String(reason[..<end])
    }
}

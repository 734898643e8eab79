import NIOCore
import NIOWebSocket

extension HTTPFuzzing {
    /// Plays `bytes` as events to the WebSocket session's state machine (client frames of
    /// any opcode, bits and size; the route's close and return; the client's FIN; the
    /// clock moving and the close timer), and returns the first broken rule, or nil:
    /// at most one close frame goes out and the channel closes at most once, nothing
    /// happens after that, no frame is delivered after the inbound ended, delivered frames
    /// form whole-message sequences, and no pong follows our close.
    public static func webSocketSession(_ bytes: [UInt8]) -> String? {
        typealias Machine = WebSocketSessionStateMachine<ContinuousClock>
        var machine = Machine(configuration: .init(closeTimeout: .seconds(2)))
        let start = ContinuousClock.now
        var elapsed = Duration.zero
        var index = 0
        func next() -> UInt8 {
            defer { index += 1 }
            return index < bytes.count ? bytes[index] : 0
        }
        var closes = 0
        var channelClosed = false
        var inboundFinished = false
        var inMessage = false
        while index < bytes.count {
            let event = next()
            let now = start.advanced(by: elapsed)
            let actions: [Machine.Action]
            switch event % 8 {
            case 0, 1, 2, 3:
                let header = next()
                let length = Int(next()) % 4 == 0 ? 126 + Int(next()) : Int(next()) % 8
                let data = ByteBuffer(repeating: next(), count: length)
                let opcode = WebSocketOpcode(encodedWebSocketOpcode: header & 0x0F) ?? .binary
                actions = machine.received(opcode: opcode, fin: header & 0x80 != 0, reservedBits: header & 0x70 != 0, data: data, now: now)
            case 4:
                actions = machine.closeRequested(WebSocketErrorCode(codeNumber: 1000 + Int(next()) % 16), reason: nil, now: now)
            case 5:
                actions = machine.handlerEnded(next() & 1 == 0 ? .normalClosure : .unexpectedServerError, now: now)
            case 6:
                actions = machine.inputClosed()
            default:
                elapsed += .milliseconds(Int(next()) * 20)
                actions = machine.closeTimerFired(now: start.advanced(by: elapsed))
            }
            if channelClosed, !actions.isEmpty { return "actions after the channel closed: \(actions)" }
            for action in actions {
                switch action {
                case .deliver(let frame):
                    if inboundFinished { return "a frame delivered after the inbound ended" }
                    if (frame.opcode == .continuation) != inMessage { return "a delivered frame out of message order" }
                    inMessage = !frame.fin
                case .sendPong:
                    if closes > 0 { return "a pong after our close" }
                case .sendClose:
                    closes += 1
                    if closes > 1 { return "a second close frame" }
                case .finishInbound:
                    if inboundFinished { return "the inbound ended twice" }
                    inboundFinished = true
                case .armCloseTimer:
                    break
                case .closeChannel:
                    channelClosed = true
                }
            }
        }
        return nil
    }
}

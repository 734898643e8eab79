import NIOCore
import NIOWebSocket
import Yamux

extension YamuxSession {
    /// Runs a new yamux session over an upgraded WebSocket channel. Call on the channel's
    /// event loop, after the upgrade installed the frame codec. The client `role` masks the
    /// frames it sends (RFC 6455 requires it of clients); the server does not.
    public static func overWebSocket(
        _ channel: any Channel, role: Role, configuration: Configuration = Configuration()
    ) throws -> YamuxSession {
        let masking = role == .client
        let writer = try WebSocketFraming.installWriter(on: channel)
        let session = YamuxSession(
            role: role,
            transport: WebSocketYamuxTransport(
                channel: channel, writer: NIOLoopBound(writer, eventLoop: channel.eventLoop), masking: masking),
            eventLoop: channel.eventLoop, configuration: configuration)
        try channel.pipeline.syncOperations.addHandler(WebSocketYamuxHandler(session: session, writer: writer, masking: masking))
        return session
    }
}

import AgentCore
import Logging
import NIOCore

/// One connection to port 2: reads the init frame (within ``ReconnectingPTYServer/initTimeout``),
/// attaches to the session of its ID (creating it first), then passes each input object to the
/// session; the session writes the terminal's output to the connection. An invalid init or
/// input object closes the connection (the session lives on).
///
/// Memory: the init frame (at most 2 + 65 535 bytes) and one unfinished input object.
final class PTYConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private enum State {
        case reading([UInt8])
        case attached(any ReconnectingSession, PTYInputDecoder)
        case closed
    }

    let server: ReconnectingPTYServer
    private var state = State.reading([])
    private var timer: Scheduled<Void>?

    init(server: ReconnectingPTYServer) {
        self.server = server
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let logger = server.logger
        timer = context.eventLoop.scheduleTask(in: server.initTimeout) {
            logger.debug("reconnecting pty: no init in time; closed the connection")
            bound.value.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        switch state {
        case .reading(var bytes):
            bytes.append(contentsOf: buffer.readableBytesView)
            switch PTYInit.read(bytes) {
            case .incomplete:
                state = .reading(bytes)
            case .invalid(let reason):
                server.logger.debug("reconnecting pty: invalid init", metadata: ["error": "\(reason)"])
                close(context)
            case .frame(let frame, let consumed):
                timer?.cancel()
                guard let session = server.session(for: frame, on: context.eventLoop) else {
                    close(context)
                    return
                }
                session.attach(context.channel, size: (frame.height, frame.width))
                state = .attached(session, PTYInputDecoder())
                feed(bytes[consumed...], context: context)
            }
        case .attached:
            feed(buffer.readableBytesView, context: context)
        case .closed:
            break
        }
    }

    private func feed(_ bytes: some Collection<UInt8>, context: ChannelHandlerContext) {
        guard case .attached(let session, var decoder) = state, !bytes.isEmpty else { return }
        let (inputs, error) = decoder.feed(bytes)
        state = .attached(session, decoder)
        for input in inputs { session.input(input, from: context.channel) }
        if let error {
            server.logger.debug("reconnecting pty: invalid input", metadata: ["error": "\(error)"])
            close(context)
        }
    }

    private func close(_ context: ChannelHandlerContext) {
        state = .closed
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case .attached(let session, _) = state { session.attachmentWritable(context.channel) }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        close(context)
    }
}

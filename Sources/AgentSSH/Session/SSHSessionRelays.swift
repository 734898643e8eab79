import NIOCore
import NIOSSH

/// Reads a process's output pipe (or terminal) into its session.
final class OutputRelay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let session: NIOLoopBound<SSHSessionHandler>
    let type: SSHChannelData.DataType
    private var ended = false

    init(session: NIOLoopBound<SSHSessionHandler>, type: SSHChannelData.DataType) {
        self.session = session
        self.type = type
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        session.value.forward(unwrapInboundIn(data), type: type, from: context.channel)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { end() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    /// A terminal whose last writer closed reads as EIO: the end of its output.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end()
        context.close(promise: nil)
    }

    private func end() {
        guard !ended else { return }
        ended = true
        session.value.outputEnded()
    }
}

/// Tells the session when the process's input can take more again.
final class InputWatch: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let session: NIOLoopBound<SSHSessionHandler>

    init(session: NIOLoopBound<SSHSessionHandler>) { self.session = session }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { session.value.inputWritable() }
        context.fireChannelWritabilityChanged()
    }
}

import NIOCore
import NIOPosix
import NIOSSH

/// Joins an SSH channel and a TCP connection byte for byte, both ways, with back pressure
/// (the side that cannot take more stops the other's reads) and half-closes passed on.
enum ChannelGlue {
    /// Adds the two handlers; call on the shared event loop.
    static func join(ssh: any Channel, tcp: any Channel) throws {
        let sshSide = SSHSide()
        let tcpSide = TCPSide()
        sshSide.peer = tcp
        tcpSide.peer = ssh
        try ssh.pipeline.syncOperations.addHandler(sshSide)
        try tcp.pipeline.syncOperations.addHandler(tcpSide)
    }

    /// Opens a channel of `type` to the client for `accepted` (a connection the agent accepted
    /// with autoRead off), joins the two once it is open and starts reading; closes
    /// `accepted` if the client refuses. The open waits for a key exchange under way
    /// (swift-nio-ssh would refuse it). Call on the connection's event loop.
    static func forwardToClient(_ accepted: any Channel, through handler: NIOSSHHandler, gate: SSHRekeyGate?, as type: SSHChannelType) {
        let promise = accepted.eventLoop.makePromise(of: (any Channel).self)
        let open = {
            handler.createChannel(promise, channelType: type) { child, _ in
                _ = child.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                return child.eventLoop.makeCompletedFuture {
                    if let gate { try RekeyHold.install(child, gate: gate) }
                    try ChannelGlue.join(ssh: child, tcp: accepted)
                }
            }
        }
        if let gate { gate.whenOpen(open) } else { open() }
        promise.futureResult.whenComplete { result in
            switch result {
            case .success: _ = accepted.setOption(ChannelOptions.autoRead, value: true)
            case .failure: accepted.close(promise: nil)
            }
        }
    }

    /// Reads again on an SSH child channel (it does not by itself when autoRead comes back).
    static func resume(_ channel: any Channel) {
        channel.setOption(ChannelOptions.autoRead, value: true).whenSuccess { channel.read() }
    }

    /// The SSH channel's end: its data to the TCP connection.
    final class SSHSide: ChannelDuplexHandler {
        typealias InboundIn = SSHChannelData
        typealias OutboundIn = SSHChannelData
        typealias OutboundOut = SSHChannelData
        var peer: (any Channel)?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let message = unwrapInboundIn(data)
            guard message.type == .channel, case .byteBuffer(let buffer) = message.data, let peer else { return }
            peer.writeAndFlush(buffer, promise: nil)
            if !peer.isWritable { _ = context.channel.setOption(ChannelOptions.autoRead, value: false) }
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if ConnectionWritability.isWritable(context.channel), let peer { _ = peer.setOption(ChannelOptions.autoRead, value: true) }
            context.fireChannelWritabilityChanged()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event, let peer {
                // After every byte before it.
                peer.writeAndFlush(peer.allocator.buffer(capacity: 0)).whenComplete { _ in peer.close(mode: .output, promise: nil) }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer?.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }

    /// The TCP connection's end: its bytes to the SSH channel.
    final class TCPSide: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var peer: (any Channel)?
        private var lastWrite: EventLoopFuture<Void>?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard let peer else { return }
            lastWrite = peer.writeAndFlush(SSHChannelData(type: .channel, data: .byteBuffer(unwrapInboundIn(data))))
            if !ConnectionWritability.isWritable(peer) { _ = context.channel.setOption(ChannelOptions.autoRead, value: false) }
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if context.channel.isWritable, let peer { ChannelGlue.resume(peer) }
            context.fireChannelWritabilityChanged()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event, let peer {
                // After every byte before it.
                (lastWrite ?? peer.eventLoop.makeSucceededVoidFuture()).whenComplete { _ in peer.close(mode: .output, promise: nil) }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer?.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}

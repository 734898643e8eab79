import DERP
import NIOCore
import Synchronization

/// The server side of one DERP connection in the double, after the transport: greets
/// with ServerKey (or the configured hostile greeting), opens ClientInfo, registers the
/// client and sends ServerInfo, then relays SendPacket, answers Ping, records the rest.
final class RelayConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let relay: DERPRelayDouble
    private var decoder = DERPFrameDecoder()
    private var peer: RelayPeer?
    private var greeted = false

    init(relay: DERPRelayDouble) {
        self.relay = relay
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { greet(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        greet(context: context)
        context.fireChannelActive()
    }

    private func greet(context: ChannelHandlerContext) {
        guard !greeted else { return }
        greeted = true
        let greeting = relay.greeting.withLock { $0 } ?? DERPFrame.serverKey(relay.serverKey.publicKey).encoded
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: greeting)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.feed(buffer: unwrapInboundIn(data))
        do {
            // Bounded: each frame consumes at least its header of what was fed.
            while let raw = try decoder.next() {
                handle(raw, context: context)
            }
        } catch {
            context.close(promise: nil)
        }
    }

    private func handle(_ raw: DERPRawFrame, context: ChannelHandlerContext) {
        guard let peer else {
            guard case .clientInfo(let key, let nonce, let sealed)? = try? DERPFrame(raw),
                let json = DERPHandshake.openClientInfo(nonce: nonce, sealed: sealed, clientKey: key, serverPrivateKey: relay.serverKey),
                let info = DERPHandshake.serverInfo(privateKey: relay.serverKey, clientKey: key)
            else {
                context.close(promise: nil)
                return
            }
            relay.recorded.withLock { $0.clientInfos.append(ClientInfoRecord(key: key, frameLength: raw.payload.count, json: String(decoding: json, as: UTF8.self))) }
            let registered = RelayPeer(channel: context.channel, key: key)
            self.peer = registered
            // Registered before ServerInfo leaves, as the Go server does: a client that
            // read ServerInfo can be sent to at once.
            relay.register(registered)
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: info.encoded)), promise: nil)
            return
        }
        guard let frame = try? DERPFrame(raw) else { return }
        switch frame {
        case .sendPacket(let destination, let packet):
            relay.forward(from: peer, to: destination, packet: packet)
        case .ping(let data):
            peer.write(DERPFrame.pong(data).encoded, bounded: false)
        case .pong(let data):
            relay.recorded.withLock { $0.pongs.append(data) }
        case .notePreferred(let preferred):
            relay.recorded.withLock { $0.notePreferred[peer.key] = preferred }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let peer { relay.unregister(peer) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

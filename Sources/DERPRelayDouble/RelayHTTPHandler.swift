import AgentSystem
import DERP
import Foundation
import NIOCore
import Synchronization
import NIOWebSocket

/// Reads the request head (at most 16 KiB) and answers as coderd's `/derp` does: 101 for
/// `Upgrade: DERP` (or the double's configured 400/503), 101 with subprotocol `derp` for
/// a WebSocket, 426 for anything else, 404 off `/derp`. After a 101 it installs the DERP
/// handler (behind the WebSocket codec and adapter when needed), hands it the bytes that
/// followed the head, and leaves.
final class RelayHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maxHead = 16 << 10
    static let webSocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    private let relay: DERPRelayDouble
    private var received: [UInt8] = []
    private var done = false

    init(relay: DERPRelayDouble) {
        self.relay = relay
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if done {
            context.fireChannelRead(data)
            return
        }
        received += unwrapInboundIn(data).readableBytesView
        guard let end = received.firstRange(of: [13, 10, 13, 10])?.upperBound else {
            if received.count > Self.maxHead { context.close(promise: nil) }
            return
        }
        done = true
        let head = String(decoding: received[..<end], as: UTF8.self)
        let rest = Array(received[end...])
        received = []
        relay.recorded.withLock { $0.requests.append(head) }
        let lines = head.split(separator: "\r\n")
        let requestLine = lines.first?.split(separator: " ") ?? []
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        guard requestLine.count >= 2, requestLine[0] == "GET", requestLine[1] == "/derp" else {
            respond(context: context, status: "404 Not Found", body: "not found")
            return
        }
        switch headers["upgrade"]?.lowercased() {
        case "derp":
            if let refusal = relay.nextRefusal() {
                respond(context: context, status: refusal.status, body: refusal.body)
                return
            }
            relay.recorded.withLock { $0.upgradeConnections += 1 }
            let response =
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: DERP\r\nConnection: Upgrade\r\nDerp-Version: 2\r\n"
                + "Derp-Public-Key: \(relay.serverKey.publicKey.hex)\r\n\r\n"
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response)), promise: nil)
            switchTo(context: context, webSocket: false, rest: rest)
        case "websocket":
            if let refusal = relay.nextFailure() {
                respond(context: context, status: refusal.status, body: refusal.body)
                return
            }
            guard let key = headers["sec-websocket-key"] else {
                respond(context: context, status: "400 Bad Request", body: "missing Sec-WebSocket-Key")
                return
            }
            let accept = Data(SHA1.hash(Array((key + Self.webSocketGUID).utf8))).base64EncodedString()
            let protocols = (headers["sec-websocket-protocol"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let speaksDERP = protocols.contains("derp")
            relay.recorded.withLock { $0.webSocketConnections += 1 }
            let response =
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(accept)\r\n" + (speaksDERP ? "Sec-WebSocket-Protocol: derp\r\n" : "") + "\r\n"
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response)), promise: nil)
            switchTo(context: context, webSocket: true, rest: rest, speaksDERP: speaksDERP)
        default:
            respond(context: context, status: "426 Upgrade Required", body: "DERP requires connection upgrade")
        }
    }

    private func switchTo(context: ChannelHandlerContext, webSocket: Bool, rest: [UInt8], speaksDERP: Bool = true) {
        let operations = context.pipeline.syncOperations
        do {
            if webSocket {
                try operations.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 2 << 20)), position: .after(self))
                let encoder = WebSocketFrameEncoder()
                try operations.addHandler(encoder, position: .before(self))
                let adapter = DERPWebSocketAdapter(masking: false)
                try operations.addHandler(adapter)
                if !speaksDERP {
                    // coderd: "client must speak the derp subprotocol", policy violation.
                    let context = try operations.context(handler: adapter)
                    adapter.sendClose(context: context, code: .policyViolation)
                    return
                }
            }
            try operations.addHandler(RelayConnectionHandler(relay: relay))
        } catch {
            context.close(promise: nil)
            return
        }
        if !rest.isEmpty { context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: rest))) }
        operations.removeHandler(self, promise: nil)
    }

    private func respond(context: ChannelHandlerContext, status: String, body: String) {
        let response = "HTTP/1.1 \(status)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}

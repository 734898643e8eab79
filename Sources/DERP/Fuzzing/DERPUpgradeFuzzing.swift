import NIOCore
import Synchronization

/// The DERP client's reading of a relay's answer to its upgrade request, for the fuzz targets
/// (`Fuzz/`, `make fuzz`): ``DERPUpgradeHandler`` on a channel the target makes (an
/// `EmbeddedChannel`), fed the answer in chunks. It exists for the fuzz targets only.
public final class DERPUpgradeFuzzing {
    /// What the answer came to.
    public enum Outcome: Equatable, Sendable {
        /// The head (or the refusal's body) is not complete yet.
        case pending
        /// A 101: what reached the DERP side behind the handler (for the WebSocket transport,
        /// the binary messages' payloads, joined).
        case upgraded(forwarded: [UInt8])
        /// The attempt failed, with the error's text.
        case failed(String)
    }

    private let channel: any Channel
    private let failure = FailureText()
    private let collector = ForwardedBytes()

    /// Installs the handler (`webSocket`: the WebSocket handshake) and a collector behind it
    /// on `channel`; the target then activates the channel, which writes the request.
    public init(webSocket: Bool, on channel: any Channel) throws {
        self.channel = channel
        let attempt = DERPConnectAttempt(promise: channel.eventLoop.makePromise(of: DERPConnection.self))
        attempt.future.whenFailure { [failure] in failure.set("\($0)") }
        try channel.pipeline.syncOperations.addHandlers([
            DERPUpgradeHandler(hostHeader: "relay.test", webSocket: webSocket, attempt: attempt), collector,
        ])
        attempt.opened(channel)
    }

    /// The `Sec-WebSocket-Accept` a relay answers `request` with (empty without a key).
    public static func accept(for request: [UInt8]) -> String {
        let prefix = "Sec-WebSocket-Key: "
        let key = String(decoding: request, as: UTF8.self).split(separator: "\r\n").first { $0.hasPrefix(prefix) }
        return key.map { DERPUpgradeHandler.webSocketAccept(key: String($0.dropFirst(prefix.count))) } ?? ""
    }

    /// Hands the handler the next bytes of the answer, unless the attempt has ended.
    public func feed(_ bytes: [UInt8]) {
        guard channel.isActive, failure.text == nil else { return }
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(ByteBuffer(bytes: bytes)))
    }

    /// What the answer has come to.
    public var outcome: Outcome {
        if let text = failure.text { return .failed(text) }
        let upgraded = (try? channel.pipeline.syncOperations.handler(type: DERPUpgradeHandler.self)) == nil
        return upgraded ? .upgraded(forwarded: collector.bytes) : .pending
    }
}

/// The attempt's failure, as text (first one wins).
private final class FailureText: Sendable {
    private let state = Mutex<String?>(nil)
    var text: String? { state.withLock { $0 } }
    func set(_ value: String) { state.withLock { $0 = $0 ?? value } }
}

/// The DERP side of the pipeline: keeps what it is handed. Confined to the channel's loop.
private final class ForwardedBytes: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private(set) var bytes: [UInt8] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bytes += unwrapInboundIn(data).readableBytesView
    }
}

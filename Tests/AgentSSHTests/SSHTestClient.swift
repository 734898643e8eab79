@testable import AgentSSH
import AgentTestSupport
import NIOCore
import NIOPosix
import NIOSSH
import Synchronization

/// A swift-nio-ssh client in the test process, for what OpenSSH's `ssh` cannot be made to
/// send or to show: a `direct-tcpip` originator that is not an IP address (as asyncssh sends),
/// a request's reply, a reverse forward's answer.
final class SSHTestClient: Sendable {
    let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Connects to 127.0.0.1:`port` and authenticates with `none` (the server's only method).
    /// With `hugeWindow`, every session channel it opens grants the server a 4 GiB window.
    static func connect(port: Int, hugeWindow: Bool = false) async throws -> SSHTestClient {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let scheme: any NIOSSHTransportProtection.Type = hugeWindow ? HugeWindowClientCipher.self : OriginatorClientCipher.self
                    let configuration = SSHClientConfiguration(
                        userAuthDelegate: NoneAuthentication(), serverAuthDelegate: AnyHostKey(),
                        transportProtectionSchemes: [scheme])
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSHHandler(role: .client(configuration), allocator: channel.allocator, inboundChildChannelInitializer: nil))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return SSHTestClient(channel: channel)
    }

    /// Runs `body` with the connection's SSH handler on its loop; `promise` fails without one.
    private func withHandler<T>(_ promise: EventLoopPromise<T>, _ body: @escaping @Sendable (NIOSSHHandler) -> Void) {
        channel.eventLoop.execute { [channel] in
            do {
                body(try channel.pipeline.syncOperations.handler(type: NIOSSHHandler.self))
            } catch {
                promise.fail(error)
            }
        }
    }

    /// Opens a channel of `type`; throws when the server refuses it.
    func open(_ type: SSHChannelType = .session) async throws -> SSHTestChannel {
        let recorder = EventRecorder()
        let promise = channel.eventLoop.makePromise(of: (any Channel).self)
        withHandler(promise) { ssh in
            ssh.createChannel(promise, channelType: type) { child, _ in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(RecordingHandler(recorder: recorder))
                }
            }
        }
        return SSHTestChannel(channel: try await promise.futureResult.get(), recorder: recorder)
    }

    /// A `direct-tcpip` open to 127.0.0.1:`port` whose originator travels as `originator`
    /// (one of ``OriginatorClientCipher/originators``' keys picks the text).
    func directTCPIP(port: Int, originator: UInt16) async throws -> SSHTestChannel {
        let origin = try SocketAddress(ipAddress: OriginatorClientCipher.placeholder, port: Int(originator))
        return try await open(.directTCPIP(.init(targetHost: "127.0.0.1", targetPort: port, originatorAddress: origin)))
    }

    /// `tcpip-forward` for `host`:`port`: the bound port (nil when the server named none), or
    /// throws when refused.
    func forward(host: String, port: Int) async throws -> Int? {
        let promise = channel.eventLoop.makePromise(of: GlobalRequest.TCPForwardingResponse?.self)
        withHandler(promise) { ssh in ssh.sendTCPForwardingRequest(.listen(host: host, port: port), promise: promise) }
        return try await promise.futureResult.get()?.boundPort
    }

    func close() async {
        try? await channel.close()
    }
}

/// One channel of ``SSHTestClient`` and what arrived on it.
final class SSHTestChannel: Sendable {
    enum Event: Sendable, Equatable {
        case data(String)
        case stderr(String)
        case success
        case failure
        case exitStatus(Int)
        case closed
    }

    let channel: any Channel
    let recorder: EventRecorder

    init(channel: any Channel, recorder: EventRecorder) {
        self.channel = channel
        self.recorder = recorder
    }

    var events: [Event] { recorder.events }
    var stdout: String { events.map { if case .data(let text) = $0 { text } else { "" } }.joined() }

    func exec(_ command: String, wantReply: Bool = true) {
        channel.triggerUserOutboundEvent(SSHChannelRequestEvent.ExecRequest(command: command, wantReply: wantReply), promise: nil)
    }

    func write(_ text: String) {
        channel.writeAndFlush(SSHChannelData(type: .channel, data: .byteBuffer(ByteBuffer(string: text))), promise: nil)
    }

    /// Waits (bounded) until the channel has closed, when its output is complete: swift-nio-ssh
    /// hands a request (`exit-status`) to the pipeline as it decodes it but holds data until the
    /// read's end, so data sent before the exit status may be recorded after it; the close
    /// delivers every held read first.
    func waitForClose(timeout: Duration = .seconds(60)) async -> Bool {
        await wait(timeout: timeout) { $0.contains(.closed) }
    }

    /// Waits (bounded) until `condition` holds for the events so far.
    func wait(timeout: Duration = .seconds(60), until condition: @escaping @Sendable ([Event]) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { condition(self.events) }
    }
}

/// What a channel received, in order. Memory: a test's few events.
final class EventRecorder: Sendable {
    private let state = Mutex<[SSHTestChannel.Event]>([])
    var events: [SSHTestChannel.Event] { state.withLock { $0 } }
    func record(_ event: SSHTestChannel.Event) { state.withLock { $0.append(event) } }
}

private final class RecordingHandler: ChannelInboundHandler {
    typealias InboundIn = SSHChannelData
    let recorder: EventRecorder

    init(recorder: EventRecorder) { self.recorder = recorder }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = unwrapInboundIn(data)
        guard case .byteBuffer(let buffer) = message.data else { return }
        let text = String(buffer: buffer)
        recorder.record(message.type == .stdErr ? .stderr(text) : .data(text))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelSuccessEvent: recorder.record(.success)
        case is ChannelFailureEvent: recorder.record(.failure)
        case let status as SSHChannelRequestEvent.ExitStatus: recorder.record(.exitStatus(status.exitStatus))
        default: context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        recorder.record(.closed)
        context.fireChannelInactive()
    }
}

private struct NoneAuthentication: NIOSSHClientUserAuthenticationDelegate {
    func nextAuthenticationType(
        availableMethods: NIOSSHAvailableUserAuthenticationMethods, nextChallengePromise: EventLoopPromise<NIOSSHUserAuthenticationOffer?>
    ) {
        nextChallengePromise.succeed(NIOSSHUserAuthenticationOffer(username: "test", serviceName: "", offer: .none))
    }
}

private struct AnyHostKey: NIOSSHClientServerAuthenticationDelegate {
    func validateHostKey(hostKey: NIOSSHPublicKey, validationCompletePromise: EventLoopPromise<Void>) {
        validationCompletePromise.succeed(())
    }
}

/// The client's AES-128-GCM, which puts the originator texts clients send (and swift-nio-ssh's
/// client cannot) into its `direct-tcpip` opens: an open from ``placeholder`` names the text by
/// its originator port.
final class OriginatorClientCipher: InterposingAESGCM, _NIOSSHSendableMetatype {
    override class var cipherName: String { "aes128-gcm@openssh.com" }
    override class var keySizes: ExpectedKeySizes { .init(ivSize: 12, encryptionKeySize: 16, macKeySize: 16) }

    static let placeholder = "192.0.2.77"
    /// Originator port → the originator text sent instead of the placeholder.
    static let originators: [UInt32: String] = [1: "", 2: "not-an-ip", 3: String(repeating: "x", count: 300)]

    override func rewriteInbound(_ payload: ByteBuffer) -> ByteBuffer { payload }

    override func rewriteOutbound(_ payload: ByteBuffer) -> ByteBuffer {
        var reader = payload
        guard reader.readInteger(as: UInt8.self) == SSHMessageRewriter.channelOpen, reader.readSSHText() == "direct-tcpip",
            let sender = reader.readInteger(as: UInt32.self), let window = reader.readInteger(as: UInt32.self),
            let maxPacket = reader.readInteger(as: UInt32.self), let host = reader.readSSHText(),
            let port = reader.readInteger(as: UInt32.self), reader.readSSHText() == Self.placeholder,
            let originPort = reader.readInteger(as: UInt32.self), let origin = Self.originators[originPort]
        else { return payload }
        var rewritten = ByteBuffer()
        rewritten.writeInteger(SSHMessageRewriter.channelOpen)
        rewritten.writeSSHText("direct-tcpip")
        rewritten.writeMultipleIntegers(sender, window, maxPacket)
        rewritten.writeSSHText(host)
        rewritten.writeInteger(port)
        rewritten.writeSSHText(origin)
        rewritten.writeInteger(originPort)
        return rewritten
    }
}

/// The client's AES-128-GCM granting the server a 4 GiB window on each session channel it
/// opens (swift-nio-ssh's client grants a smaller one), as a hostile client may.
final class HugeWindowClientCipher: InterposingAESGCM, _NIOSSHSendableMetatype {
    override class var cipherName: String { "aes128-gcm@openssh.com" }
    override class var keySizes: ExpectedKeySizes { .init(ivSize: 12, encryptionKeySize: 16, macKeySize: 16) }

    override func rewriteInbound(_ payload: ByteBuffer) -> ByteBuffer { payload }

    override func rewriteOutbound(_ payload: ByteBuffer) -> ByteBuffer {
        var reader = payload
        guard reader.readInteger(as: UInt8.self) == SSHMessageRewriter.channelOpen, reader.readSSHText() == "session",
            let sender = reader.readInteger(as: UInt32.self), reader.readInteger(as: UInt32.self) != nil,
            let maxPacket = reader.readInteger(as: UInt32.self)
        else { return payload }
        var rewritten = ByteBuffer()
        rewritten.writeInteger(SSHMessageRewriter.channelOpen)
        rewritten.writeSSHText("session")
        rewritten.writeMultipleIntegers(sender, UInt32.max, maxPacket)
        return rewritten
    }
}

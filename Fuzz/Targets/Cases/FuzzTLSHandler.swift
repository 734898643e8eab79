import AgentTLS
import NIOCore
import NIOEmbedded
import NIOTLS

/// A peer's bytes into AgentTLS's handler, as a server (the bytes are a client's) or as a
/// client (they answer its ClientHello), split anywhere. Nothing surfaces as plaintext before
/// a completed handshake; a secret written before the handshake never leaves in the clear;
/// a failure closes the connection with one error; the outcome (still waiting, closed with
/// which error) does not depend on the split.
public func fuzzTLSHandler(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let server = input.bool()
    let split = input.byte()
    let peer = input.rest()
    let whole = TLSFuzzRun(server: server).run([peer])
    var splitter = FuzzInput(Array(repeating: split, count: peer.count))
    let chunked = TLSFuzzRun(server: server).run(splitter.chunks(of: peer, maxChunk: Int(split % 128) + 1))
    require(whole == chunked, "the outcome depends on the split: \(whole) against \(chunked)")
    return 0
}

/// One handler on an embedded channel and what it did.
private struct TLSFuzzRun {
    struct Outcome: Equatable, CustomStringConvertible {
        var active: Bool
        var errors: [String]
        var description: String { "active \(active), errors \(errors)" }
    }

    /// Written before the handshake: it must never appear in the clear.
    static let secret = Array("Coder-Session-Token: fuzz-secret-0123456789".utf8)

    // A throwaway self-signed certificate for `fuzz.invalid` (EC P-256), for the server side.
    static let certificate = Array(
        """
        -----BEGIN CERTIFICATE-----
        MIIBnzCCAUSgAwIBAgIUIfDHZM/2OSkashoPGvwbRvdSNxEwCgYIKoZIzj0EAwIw
        FzEVMBMGA1UEAwwMZnV6ei5pbnZhbGlkMCAXDTI2MTEyODIxMjkzOVoYDzIxMjYx
        MTA0MjEyOTM5WjAXMRUwEwYDVQQDDAxmdXp6LmludmFsaWQwWTATBgcqhkjOPQIB
        BggqhkjOPQMBBwNCAATX6zskTXN4Owi38duoF8PuuSXRw0X6PprY6QnYtsSGb2k0
        qhSNdLe+mWkgMVeUL38Zp0qGEyyOb1EFav+tPCfuo2wwajAdBgNVHQ4EFgQUUNCY
        ufiiNrU11MwtBkk45CPbGMcwHwYDVR0jBBgwFoAUUNCYufiiNrU11MwtBkk45CPb
        GMcwDwYDVR0TAQH/BAUwAwEB/zAXBgNVHREEEDAOggxmdXp6LmludmFsaWQwCgYI
        KoZIzj0EAwIDSQAwRgIhAPHrJUxXUTqecGiBnyjJtzSrd0+llaxReklYMC2vc3Fg
        AiEApnVN9g4okMXuD2c3eKFxmGmbDKc4RMQaE67tdKRsnZs=
        -----END CERTIFICATE-----

        """.utf8)
    static let key = Array(
        """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLIor7o38h9Oul1U3
        Td81cGOuAdzQIrkrWd1UDinQdaehRANCAATX6zskTXN4Owi38duoF8PuuSXRw0X6
        PprY6QnYtsSGb2k0qhSNdLe+mWkgMVeUL38Zp0qGEyyOb1EFav+tPCfu
        -----END PRIVATE KEY-----

        """.utf8)

    static let serverContext = try? TLSContext(
        configuration: .makeServerConfiguration(.pem(certificateChain: certificate, privateKey: key)))
    static let clientContext: TLSContext? = {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        configuration.applicationProtocols = ["http/1.1"]
        return try? TLSContext(configuration: configuration)
    }()

    let server: Bool

    func run(_ chunks: [[UInt8]]) -> Outcome {
        let recorder = TLSFuzzRecorder()
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        do {
            guard let context = server ? Self.serverContext : Self.clientContext else {
                require(false, "the fuzz target's TLS context could not be made")
                return Outcome(active: false, errors: [])
            }
            let handler = server ? try TLSHandler(server: context) : try TLSHandler(client: context, serverName: "fuzz.invalid")
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.pipeline.syncOperations.addHandler(recorder)
            channel.writeAndFlush(ByteBuffer(bytes: Self.secret), promise: nil)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
            var sent: [UInt8] = []
            for chunk in chunks where channel.isActive {
                try channel.writeInbound(ByteBuffer(bytes: chunk))
                while let buffer = try channel.readOutbound(as: ByteBuffer.self) { sent += buffer.readableBytesView }
            }
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { sent += buffer.readableBytesView }
            require(sent.firstRange(of: Self.secret) == nil, "the secret left in the clear")
            if !recorder.handshakeCompleted { require(recorder.plaintext == 0, "plaintext before a completed handshake") }
            if !channel.isActive { require(recorder.errors.count <= 1, "more than one error: \(recorder.errors)") }
            return Outcome(active: channel.isActive, errors: recorder.errors.map { kind(of: $0) })
        } catch {
            require(false, "the embedded channel failed: \(error)")
            return Outcome(active: false, errors: [])
        }
    }

    /// An error's kind, without OpenSSL's reason (which may name the record it stopped at).
    private func kind(of error: any Error) -> String {
        switch error as? TLSError {
        case .handshakeFailed: "handshake"
        case .failed: "failed"
        case .some(let other): "\(other)"
        case nil: "\(type(of: error))"
        }
    }
}

/// The top of the fuzzed pipeline.
private final class TLSFuzzRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var plaintext = 0
    var handshakeCompleted = false
    var errors: [any Error] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { plaintext += unwrapInboundIn(data).readableBytes }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { handshakeCompleted = true }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
}

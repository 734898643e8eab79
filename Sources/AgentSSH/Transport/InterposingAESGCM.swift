import Crypto
import FoundationEssentials
import NIOCore
import NIOSSH

/// AES-GCM in OpenSSH's mode (`aes128-gcm@openssh.com`, `aes256-gcm@openssh.com`), with
/// ``SSHMessageRewriter`` between the cipher and swift-nio-ssh's parser.
///
/// The packet length travels in clear as associated data; the 12-byte nonce is the
/// key exchange's IV with its last 8 bytes counting packets (RFC 5647 §7.1). A key exchange
/// makes a new instance, so the rewriter's memory lasts until the next rekey.
class InterposingAESGCM {
    class var cipherName: String { fatalError("a subclass names its cipher") }
    class var keySizes: ExpectedKeySizes { fatalError("a subclass gives its key sizes") }

    private var outboundKey: SymmetricKey
    private var inboundKey: SymmetricKey
    private var outboundNonce: [UInt8]
    private var inboundNonce: [UInt8]
    private var rewriter = SSHMessageRewriter()
    /// The connection's rekey gate (nil outside the server: a test's client, unit tests).
    private let rekey = SSHParsingScope.currentRekey

    required init(initialKeys: NIOSSHSessionKeys) throws {
        (outboundKey, inboundKey, outboundNonce, inboundNonce) = try Self.unpack(initialKeys)
    }

    private static func unpack(_ keys: NIOSSHSessionKeys) throws -> (SymmetricKey, SymmetricKey, [UInt8], [UInt8]) {
        guard keys.outboundEncryptionKey.bitCount == keySizes.encryptionKeySize * 8,
            keys.inboundEncryptionKey.bitCount == keySizes.encryptionKeySize * 8,
            keys.initialOutboundIV.count == 12, keys.initialInboundIV.count == 12
        else { throw SSHTransportError.invalidKeySize }
        return (keys.outboundEncryptionKey, keys.inboundEncryptionKey, keys.initialOutboundIV, keys.initialInboundIV)
    }

    /// What a decrypted message becomes before swift-nio-ssh parses it: the server's
    /// ``SSHMessageRewriter``. A test's client overrides both to send what clients send.
    func rewriteInbound(_ payload: ByteBuffer) -> ByteBuffer { rewriter.inbound(payload) }

    /// What a message swift-nio-ssh serialized becomes before it is encrypted.
    func rewriteOutbound(_ payload: ByteBuffer) -> ByteBuffer { rewriter.outbound(payload) }

    /// Adds one to the nonce's 64-bit big-endian invocation counter (its last 8 bytes).
    static func increment(_ nonce: inout [UInt8]) {
        for index in stride(from: 11, through: 4, by: -1) {
            nonce[index] &+= 1
            if nonce[index] != 0 { return }
        }
    }
}

extension InterposingAESGCM: NIOSSHTransportProtection {
    static var macName: String? { nil }
    static var cipherBlockSize: Int { 16 }
    var macBytes: Int { 16 }
    var lengthEncrypted: Bool { false }

    func updateKeys(_ newKeys: NIOSSHSessionKeys) throws {
        (outboundKey, inboundKey, outboundNonce, inboundNonce) = try Self.unpack(newKeys)
    }

    func decryptFirstBlock(_ source: inout ByteBuffer) throws {
        // The length is in clear.
    }

    func decryptAndVerifyRemainingPacket(_ source: inout ByteBuffer, sequenceNumber: UInt32) throws -> ByteBuffer {
        if let gate = rekey?.value, gate.isReplaying { return rewriteInbound(try gate.replay(&source)) }
        guard let length = source.readSlice(length: 4), source.readableBytes > 16,
            let ciphertext = source.readSlice(length: source.readableBytes - 16), let tag = source.readSlice(length: 16),
            ciphertext.readableBytes % Self.cipherBlockSize == 0
        else { throw SSHTransportError.invalidPacketLength }
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: inboundNonce), ciphertext: ciphertext.readableBytesView, tag: tag.readableBytesView)
        let plaintext = try AES.GCM.open(box, using: inboundKey, authenticating: length.readableBytesView)
        Self.increment(&inboundNonce)
        // padding_length, payload, padding (at least 4 bytes of it).
        guard let padding = plaintext.first.map(Int.init), padding >= 4, padding + 1 <= plaintext.count else {
            throw SSHTransportError.invalidPadding
        }
        var payload = ByteBufferAllocator().buffer(capacity: plaintext.count - padding - 1)
        payload.writeBytes(plaintext[plaintext.startIndex + 1..<plaintext.endIndex - padding])
        if let gate = rekey?.value { payload = try gate.inbound(payload) }
        return rewriteInbound(payload)
    }

    func encryptPacket(_ destination: inout ByteBuffer, sequenceNumber: UInt32) throws {
        let start = destination.readerIndex
        // The serializer wrote length, padding_length, payload and padding in clear.
        if let padding = destination.getInteger(at: start + 4, as: UInt8.self),
            let payload = destination.getSlice(at: start + 5, length: destination.readableBytes - 5 - Int(padding))
        {
            let rewritten = rewriteOutbound(payload)
            if rewritten != payload { Self.reframe(&destination, payload: rewritten) }
            if rewritten.getInteger(at: rewritten.readerIndex, as: UInt8.self) == SSHRekeyMachine.newKeysType {
                rekey?.value.outbound(type: SSHRekeyMachine.newKeysType)
            }
        }
        let sealed = try AES.GCM.seal(
            destination.viewBytes(at: start + 4, length: destination.readableBytes - 4)!, using: outboundKey,
            nonce: AES.GCM.Nonce(data: outboundNonce), authenticating: destination.viewBytes(at: start, length: 4)!)
        destination.setBytes(Array(sealed.ciphertext), at: start + 4)
        destination.writeBytes(Array(sealed.tag))
        Self.increment(&outboundNonce)
    }

    /// Writes a new clear packet for `payload` in place of the one at the reader index:
    /// padding to the block size, at least 4 bytes of it (RFC 4253 §6).
    static func reframe(_ destination: inout ByteBuffer, payload: ByteBuffer) {
        let start = destination.readerIndex
        var padding = cipherBlockSize - (payload.readableBytes + 1) % cipherBlockSize
        if padding < 4 { padding += cipherBlockSize }
        destination.moveWriterIndex(to: start)
        destination.writeInteger(UInt32(1 + payload.readableBytes + padding))
        destination.writeInteger(UInt8(padding))
        destination.writeImmutableBuffer(payload)
        destination.writeBytes((0..<padding).map { _ in UInt8.random(in: 0...255) })
    }
}

/// `aes128-gcm@openssh.com` (OpenSSH's client prefers it to the 256-bit one).
final class InterposingAES128GCM: InterposingAESGCM, _NIOSSHSendableMetatype {
    override class var cipherName: String { "aes128-gcm@openssh.com" }
    override class var keySizes: ExpectedKeySizes { .init(ivSize: 12, encryptionKeySize: 16, macKeySize: 16) }
}

/// `aes256-gcm@openssh.com`.
final class InterposingAES256GCM: InterposingAESGCM, _NIOSSHSendableMetatype {
    override class var cipherName: String { "aes256-gcm@openssh.com" }
    override class var keySizes: ExpectedKeySizes { .init(ivSize: 12, encryptionKeySize: 32, macKeySize: 16) }
}

/// Why a packet could not be decrypted (the connection ends).
enum SSHTransportError: Error {
    case invalidKeySize
    case invalidPacketLength
    case invalidPadding
}

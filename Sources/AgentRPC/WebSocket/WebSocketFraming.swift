import NIOCore
import NIOWebSocket

/// WebSocket framing for bulk binary traffic: a frame encoder and an unmasking helper that
/// XOR the masking key eight bytes at a time. NIO's own masking walks the payload byte by
/// byte (with a modulo per byte) and dominated the CPU time of 1 MiB messages.
public enum WebSocketFraming {
    /// Installs a ``WebSocketFrameWriter`` on the socket side of NIO's frame encoder (which
    /// NIO's upgraders add and which cannot be removed) and returns it. Frames written
    /// through it skip NIO's encoder. Call on the channel's loop, right after the upgrade.
    public static func installWriter(on channel: any Channel) throws -> WebSocketFrameWriter {
        let operations = channel.pipeline.syncOperations
        let nioEncoder = try operations.handler(type: WebSocketFrameEncoder.self)
        let writer = WebSocketFrameWriter()
        try operations.addHandler(writer, position: .before(nioEncoder))
        return writer
    }

    /// XORs `bytes` with the repeating 4-byte `key` (RFC 6455 §5.3), starting at key byte 0.
    public static func mask(_ bytes: UnsafeMutableRawBufferPointer, key: WebSocketMaskingKey) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        var pattern: UInt64 = 0
        withUnsafeMutableBytes(of: &pattern) { p in
            for i in 0..<8 { p[i] = key[key.index(key.startIndex, offsetBy: i % 4)] }
        }
        let count = bytes.count
        var offset = 0
        while offset + 8 <= count {
            let word = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            base.storeBytes(of: word ^ pattern, toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < count {
            bytes[offset] ^= key[key.index(key.startIndex, offsetBy: offset % 4)]
            offset += 1
        }
    }
}

extension ByteBuffer {
    /// Masks (or unmasks) the readable bytes in place, eight at a time.
    public mutating func wordMask(_ key: WebSocketMaskingKey) {
        withUnsafeMutableReadableBytes { WebSocketFraming.mask($0, key: key) }
    }
}

extension WebSocketFrame {
    /// The payload as an array, unmasked while it is copied (one pass over the bytes).
    public var unmaskedBytes: [UInt8] {
        let payload = data
        let count = payload.readableBytes
        guard let key = maskKey else { return Array(payload.readableBytesView) }
        return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            payload.withUnsafeReadableBytes { source in
                let target = UnsafeMutableRawBufferPointer(out)
                target.copyMemory(from: source)
                WebSocketFraming.mask(UnsafeMutableRawBufferPointer(rebasing: target[0..<count]), key: key)
            }
            initialized = count
        }
    }

    /// The payload with the client's mask removed (a copy only when masked).
    public var wordUnmaskedData: ByteBuffer {
        guard let key = maskKey else { return data }
        var payload = data
        payload.wordMask(key)
        return payload
    }
}

/// Writes `WebSocketFrame`s as bytes (header, then the payload masked in place when the
/// frame has a key) from its own place in the pipeline. Extension data is not supported (no
/// extension is negotiated). Confined to the channel's loop.
public final class WebSocketFrameWriter: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?
    private var closeSent = false

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Sends a normal-closure close frame (once, whoever asks first: our side closing, or
    /// the answer to the peer's close), then closes the connection once it is written.
    public func closeAndHangUp(masking: Bool) {
        guard !closeSent, let context else { return }
        closeSent = true
        var reason = context.channel.allocator.buffer(capacity: 2)
        reason.write(webSocketErrorCode: .normalClosure)
        let channel = context.channel
        let written = channel.eventLoop.makePromise(of: Void.self)
        write(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: masking ? .random() : nil, data: reason), promise: written)
        written.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }

    /// Encodes and writes `frame`, flushing unless told not to.
    public func write(_ frame: WebSocketFrame, flush: Bool = true, promise: EventLoopPromise<Void>? = nil) {
        guard let context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        var payload = frame.data
        let length = payload.readableBytes
        var header = context.channel.allocator.buffer(capacity: 14)
        var first = UInt8(webSocketOpcode: frame.opcode)
        if frame.fin { first |= 0x80 }
        if frame.rsv1 { first |= 0x40 }
        if frame.rsv2 { first |= 0x20 }
        if frame.rsv3 { first |= 0x10 }
        header.writeInteger(first)
        let maskBit: UInt8 = frame.maskKey == nil ? 0 : 0x80
        if length < 126 {
            header.writeInteger(maskBit | UInt8(length))
        } else if length <= Int(UInt16.max) {
            header.writeInteger(maskBit | 126)
            header.writeInteger(UInt16(length))
        } else {
            header.writeInteger(maskBit | 127)
            header.writeInteger(UInt64(length))
        }
        if let key = frame.maskKey {
            header.writeBytes(key)
            payload.wordMask(key)
        }
        context.write(wrapOutboundOut(header), promise: nil)
        context.write(wrapOutboundOut(payload), promise: promise)
        if flush { context.flush() }
    }
}

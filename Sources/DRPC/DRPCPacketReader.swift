/// Bytes in, packets out: a ``DRPCFrameDecoder`` feeding a ``DRPCPacketAssembler``.
public struct DRPCPacketReader: Sendable {
    private var decoder: DRPCFrameDecoder
    private var assembler: DRPCPacketAssembler

    public init(maxPacketSize: Int = DRPCPacketAssembler.defaultMaxPacketSize) {
        decoder = DRPCFrameDecoder(maxFrameData: maxPacketSize)
        assembler = DRPCPacketAssembler(maxPacketSize: maxPacketSize)
    }

    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        decoder.feed(bytes)
    }

    public mutating func feed(_ bytes: [UInt8]) {
        decoder.feed(bytes)
    }

    /// True when the bytes received end inside a frame (after ``next()`` returned nil); see
    /// ``DRPCFrameDecoder/isMidFrame``.
    public var isMidFrame: Bool { decoder.isMidFrame }

    /// Frames decoded so far (``DRPCFrameDecoder/framesDecoded``).
    public var framesDecoded: UInt64 { decoder.framesDecoded }

    /// The next complete packet, or nil until more bytes arrive. After a throw the
    /// transport must be closed.
    public mutating func next() throws(DRPCWireError) -> DRPCPacket? {
        while let frame = try decoder.next() {
            if let packet = try assembler.append(frame) { return packet }
        }
        return nil
    }
}

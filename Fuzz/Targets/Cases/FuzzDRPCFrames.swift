import DRPC

/// dRPC's wire format (control byte, three varints, data) decoded from a stream split
/// anywhere: the frames and packets, and where it fails, must not depend on the split; a
/// frame re-encodes to bytes that decode to it; the frames never account for more bytes
/// than were given; packets stay within the size limit; varints and error bodies round-trip.
public func fuzzDRPCFrames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    // A small limit most of the time, so the size checks are reached.
    let limit = input.bool() ? DRPCPacketAssembler.defaultMaxPacketSize : Int(input.uint(2)) + 1
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 40)

    let whole = frames(of: [stream], limit: limit)
    let split = frames(of: chunks, limit: limit)
    require(whole.frames == split.frames && whole.error == split.error, "frames depend on where the stream is split")
    var consumed = 0
    for frame in whole.frames {
        require(frame.data.count <= limit, "a frame over the limit")
        let encoded = frame.encoded
        consumed += encoded.count
        var decoder = DRPCFrameDecoder(maxFrameData: limit)
        decoder.feed(encoded)
        require((try? decoder.next()) == frame && decoder.bufferedCount == 0, "a frame does not round-trip")
    }
    require(consumed <= stream.count, "frames account for \(consumed) bytes of \(stream.count)")

    let wholePackets = packets(of: [stream], limit: limit)
    let splitPackets = packets(of: chunks, limit: limit)
    require(wholePackets.packets == splitPackets.packets && wholePackets.error == splitPackets.error, "packets depend on the split")
    for packet in wholePackets.packets {
        require(packet.data.count <= limit && packet.streamID > 0, "a packet over the limit or on stream 0")
    }

    if case .value(let value, let length) = Varint.decode(stream, at: 0) {
        let encoded = Varint.encoded(value)
        require(encoded.count <= length, "a varint's minimal encoding is longer than the one read")
        require(Varint.decode(encoded, at: 0) == .value(value, length: encoded.count), "a varint does not round-trip")
    }
    let body = DRPCErrorBody(decoding: stream)
    if stream.count >= 8, String(validating: stream.dropFirst(8), as: UTF8.self) != nil {
        require(body.encoded == stream, "an error body does not round-trip")
    }
    return 0
}

private func frames(of chunks: [[UInt8]], limit: Int) -> (frames: [DRPCFrame], error: DRPCWireError?) {
    var decoder = DRPCFrameDecoder(maxFrameData: limit)
    let (frames, error) = decodeSplit(chunks, feed: { decoder.feed($0) }, next: { () throws(DRPCWireError) in try decoder.next() })
    return (frames, error)
}

private func packets(of chunks: [[UInt8]], limit: Int) -> (packets: [DRPCPacket], error: DRPCWireError?) {
    var reader = DRPCPacketReader(maxPacketSize: limit)
    let (packets, error) = decodeSplit(chunks, feed: { reader.feed($0) }, next: { () throws(DRPCWireError) in try reader.next() })
    return (packets, error)
}

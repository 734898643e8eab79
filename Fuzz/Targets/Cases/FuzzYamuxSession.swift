import Yamux

/// yamux: frames decoded from a stream split anywhere must not depend on the split; and a
/// session's protocol rules (the state machine behind `YamuxSession`), driven by peer bytes
/// (raw, or frames built from the input) mixed with local calls and timers, must keep its
/// bounds: no stream buffers more than its window, queued data stays under its cap plus a
/// frame, the transport is closed at most once and nothing is written after, and every
/// write is whole, valid yamux frames.
public func fuzzYamuxSession(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() % 4 == 0 {
        decoding(&input)
        return 0
    }
    let role: YamuxSession.Role = input.bool() ? .client : .server
    var configuration = YamuxSession.Configuration()
    // Small windows and queues most of the time, so their limits are reached.
    if input.bool() {
        configuration.window = UInt32(input.int(in: 1...4096))
        configuration.maxQueuedData = input.int(in: 1...8192)
        configuration.maxDataFrame = input.int(in: 1...4096)
        configuration.acceptBacklog = input.int(in: 0...8)
    }
    let driver = YamuxFuzzDriver(role: role, configuration: configuration)
    var steps = 0
    while !input.isEmpty, steps < 200 {
        steps += 1
        driver.perform(operation(&input, peerStreams: role == .client ? 2 : 1))
        require(driver.maxBuffered <= driver.receiveWindow, "a stream buffered \(driver.maxBuffered) bytes, over its window")
        require(driver.maxQueuedData <= driver.queueLimit + driver.maxDataFrame, "queued data over its cap")
        require(driver.transportClosedCount <= 1 && driver.bytesAfterClose == 0, "writes after the transport was closed")
    }
    driver.perform(.closeSession)
    require(driver.transportClosedCount == 1, "closing the session did not close the transport")
    for write in driver.writes {
        // Each write is whole frames: they account for every byte of it.
        var decoder = YamuxFrameDecoder(maxPayload: UInt32.max)
        decoder.feed(write)
        var framed = 0
        do {
            while let frame = try decoder.next() {
                framed += YamuxHeader.size + frame.payload.count
                if frame.header.type == .data {
                    require(frame.payload.count <= driver.maxDataFrame, "a data frame over the largest we send")
                }
            }
        } catch {
            require(false, "the session wrote an invalid frame: \(error)")
        }
        require(framed == write.count, "a write of \(write.count) bytes holds \(framed) bytes of whole frames")
    }
    return 0
}

/// One step of the case: mostly peer bytes, as raw bytes or as a frame built from fields.
private func operation(_ input: inout FuzzInput, peerStreams firstPeerID: UInt32) -> YamuxFuzzDriver.Operation {
    let stream = Int(input.byte() % 8)
    switch input.byte() % 20 {
    case 0, 1, 2: return .receive(input.data(maxLength: 300))
    case 3, 4, 5, 6:
        // A well-formed header (version 0, a known type) on a small stream ID.
        let type = YamuxType(rawValue: input.byte() % 4) ?? .data
        let flags = YamuxFlags(rawValue: UInt16(input.byte() % 16))
        let id = input.bool() ? UInt32(input.byte() % 8) : firstPeerID + 2 * UInt32(input.byte() % 4)
        let payload = type == .data ? input.data(maxLength: 300) : []
        let length = type == .data ? UInt32(payload.count) : UInt32(input.uint(4))
        return .receive(YamuxFrame(header: YamuxHeader(type: type, flags: flags, streamID: id, length: length), payload: payload).encoded)
    case 7: return .open
    case 8: return .write(stream: stream, input.data(maxLength: 600))
    case 9: return .read(stream: stream)
    case 10: return .closeWrite(stream: stream)
    case 11: return .close(stream: stream)
    case 12: return .reset(stream: stream)
    case 13: return .sink(stream: stream)
    case 14: return input.bool() ? .accept : .acceptWithHandler
    case 15: return .ping
    case 16: return .goAway(input.byte())
    case 17: return .sweep(advanceSeconds: UInt16(input.uint(2) % 400))
    case 18: return .transportWritable(input.bool())
    default: return input.byte() % 8 == 0 ? .transportClosed : .flush
    }
}

/// The frame decoder alone: the same frames and the same error however the stream is split.
private func decoding(_ input: inout FuzzInput) {
    let maxPayload = UInt32(input.uint(2))
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 40)
    func decode(_ chunks: [[UInt8]]) -> ([YamuxFrame], YamuxError?) {
        var decoder = YamuxFrameDecoder(maxPayload: maxPayload)
        let (frames, error) = decodeSplit(chunks, feed: { decoder.feed($0) }, next: { () throws(YamuxError) in try decoder.next() })
        return (frames, error)
    }
    let whole = decode([stream])
    let split = decode(chunks)
    require(whole.0 == split.0 && whole.1 == split.1, "yamux frames depend on where the stream is split")
    var consumed = 0
    for frame in whole.0 {
        require(frame.header.type != .data || frame.payload.count <= Int(maxPayload), "a data frame over the decoder's limit")
        consumed += YamuxHeader.size + frame.payload.count
    }
    require(consumed <= stream.count, "frames account for more bytes than were given")
}

import DERP

/// Fixed keys, so that the input can carry boxes that open (the seeds hold some).
private let ourKey = X25519PrivateKey(Array(repeating: 0x11, count: 32))!
private let peerKey = X25519PrivateKey(Array(repeating: 0x22, count: 32))!

/// DERP frames (type, big-endian length, payload) decoded from a stream split anywhere:
/// the frames and the error must not depend on the split; no frame is over the 1 MiB
/// limit nor do frames account for more bytes than were given; every frame that parses
/// re-encodes to one that parses the same. The same bytes as a disco packet (sealed by the
/// peer's fixed key to ours when the input asks) and as a disco payload: opening and parsing
/// never crash, parsed messages re-encode to the same message, and a Ping's Pong opens to
/// the same TxID. ServerInfo boxes of the input's bytes open to JSON or a clear error.
public func fuzzDERPFrames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    // A small limit some of the time, so the size check is reached.
    let limit = input.bool() ? DERPProtocol.maxFrameLength : Int(input.uint(2)) + 1
    let sealDisco = input.bool()
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 40)

    let whole = frames(of: [stream], limit: limit)
    let split = frames(of: chunks, limit: limit)
    require(whole.frames == split.frames && whole.error == split.error, "frames depend on where the stream is split")
    var consumed = 0
    for raw in whole.frames {
        require(raw.payload.count <= limit, "a frame over the limit")
        consumed += raw.encoded.count
        if let frame = try? DERPFrame(raw) {
            var decoder = DERPFrameDecoder()
            decoder.feed(frame.encoded)
            let again = (try? decoder.next()).flatMap { $0 }.flatMap { try? DERPFrame($0) }
            require(again == frame, "a frame does not round-trip")
        }
    }
    require(consumed <= stream.count, "frames account for \(consumed) bytes of \(stream.count)")

    // The stream as a disco message's plaintext.
    if let message = try? DiscoMessage(decoding: stream) {
        require((try? DiscoMessage(decoding: message.encoded)) == message, "a disco message does not round-trip")
    }
    // The stream as a received disco packet.
    let packet = sealDisco ? (Disco.seal(rawPlain: stream, privateKey: peerKey, to: ourKey.publicKey) ?? stream) : stream
    if let received = try? Disco.open(packet, privateKey: ourKey) {
        if case .ping(let txID, _) = received.message {
            let pong = Disco.pong(answering: received, privateKey: ourKey, regionID: 999)
            let answer = pong.flatMap { try? Disco.open($0, privateKey: peerKey) }
            require(answer?.sender == ourKey.publicKey, "a Pong does not open for the pinger")
            if case .pong(let echoed, _, let port)? = answer?.message {
                require(echoed == txID && port == 999, "a Pong does not echo the TxID")
            } else {
                require(false, "a Ping's answer is not a Pong")
            }
        }
    }
    // The stream as a ServerInfo's JSON.
    if let info = DERPHandshake.serverInfo(json: String(decoding: stream, as: UTF8.self), privateKey: peerKey, clientKey: ourKey.publicKey),
        case .serverInfo(let nonce, let sealed) = info
    {
        _ = try? DERPHandshake.openServerInfo(nonce: nonce, sealed: sealed, privateKey: ourKey, serverKey: peerKey.publicKey)
    }
    return 0
}

private func frames(of chunks: [[UInt8]], limit: Int) -> (frames: [DERPRawFrame], error: DERPWireError?) {
    var decoder = DERPFrameDecoder(maxFrameLength: limit)
    let (frames, error) = decodeSplit(chunks, feed: { decoder.feed($0) }, next: { () throws(DERPWireError) in try decoder.next() })
    return (frames, error)
}

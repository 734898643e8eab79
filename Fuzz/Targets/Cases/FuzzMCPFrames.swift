import AgentCore
import MCPWire

/// MCP's stdio framing and JSON-RPC messages as a server's stdout delivers them: the lines
/// and where the decoder fails must not depend on where the stream is split; no line is
/// empty, over the limit, or holds a newline; the lines never account for more bytes than
/// were given; a parsed message encodes to one line that parses back to it; a result maps
/// to content items of the four known types. The same bytes as an HTTP event stream
/// (`SSEDecoder`): the events and the failure do not depend on the split either, no event's
/// data is over the limit, a failed decoder holds nothing and a working one at most the limit
/// and its slack.
public func fuzzMCPFrames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    // A small limit most of the time, so the bound is reached.
    let limit = input.bool() ? MCPLimits.maxMessageBytes : Int(input.uint(2)) + 1
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 40)

    let whole = lines(of: [stream], limit: limit)
    let split = lines(of: chunks, limit: limit)
    require(whole.lines == split.lines && whole.failed == split.failed, "lines depend on where the stream is split")
    var total = 0
    for line in whole.lines {
        require(!line.isEmpty && line.count <= limit, "an empty line or one over the limit")
        // One CR before the newline is dropped; more are the line's (JSON whitespace).
        require(!line.contains(UInt8(ascii: "\n")), "a newline in a line")
        total += line.count
        guard let message = try? JSONRPCMessage.parse(line) else { continue }
        let encoded = message.encodedLine()
        require(encoded.last == UInt8(ascii: "\n") && encoded.dropLast().firstIndex(of: UInt8(ascii: "\n")) == nil, "an encoded message is not one line")
        require((try? JSONRPCMessage.parse(encoded.dropLast())) == message, "a message does not round-trip")
        if case .result(_, let value) = message, let result = try? MCPToolResult(mapping: value) {
            for item in result.content {
                require(["text", "image", "audio", "resource"].contains(item.type), "content mapped to an unknown type")
            }
        }
    }
    require(total <= stream.count, "lines account for \(total) bytes of \(stream.count)")

    let wholeEvents = events(of: [stream], limit: limit)
    let splitEvents = events(of: chunks, limit: limit)
    require(wholeEvents.events == splitEvents.events && wholeEvents.failed == splitEvents.failed, "events depend on where the stream is split")
    for event in wholeEvents.events {
        require(!event.type.isEmpty && event.data.count <= limit, "an event without a type or over the limit")
    }
    return 0
}

private func events(of chunks: [[UInt8]], limit: Int) -> (events: [SSEEvent], failed: Bool) {
    var decoder = SSEDecoder(maxEventBytes: limit)
    var out: [SSEEvent] = []
    for chunk in chunks {
        do throws(SSEDecoder.EventTooLong) {
            try decoder.feed(chunk) { out.append($0) }
        } catch {
            require(decoder.bufferedBytes == 0, "a failed event decoder holds bytes")
            return (out, true)
        }
        require(decoder.bufferedBytes <= limit + SSEDecoder.fieldSlack, "the event decoder holds more than the limit and its slack")
    }
    return (out, false)
}

private func lines(of chunks: [[UInt8]], limit: Int) -> (lines: [[UInt8]], failed: Bool) {
    var decoder = JSONLineDecoder(maxLineBytes: limit)
    var out: [[UInt8]] = []
    for chunk in chunks {
        do throws(JSONLineDecoder.LineTooLong) {
            try decoder.feed(chunk) { out.append($0) }
        } catch {
            require(decoder.bufferedBytes == 0, "a failed decoder holds bytes")
            return (out, true)
        }
        require(decoder.bufferedBytes <= limit + 1, "the decoder holds more than the limit and a CR")
    }
    return (out, false)
}

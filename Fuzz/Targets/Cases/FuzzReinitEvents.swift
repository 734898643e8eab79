import AgentRPC

/// `/reinit`'s server-sent events (AgentRPC's `ReinitStreamParser`): any bytes give items and
/// at most one error, never a trap; the same items and error however the stream is split; an event's
/// ids are canonical UUIDs (the owner never the zero one); and a stream of only pings and
/// blank lines gives only pings.
public func fuzzReinitEvents(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let split = input.byte()
    let bytes = input.rest()
    var whole = ReinitStreamParser()
    let wholeResult = feed(&whole, [bytes])
    var chunked = ReinitStreamParser()
    var splitter = FuzzInput(Array(repeating: split, count: bytes.count))
    let chunkedResult = feed(&chunked, splitter.chunks(of: bytes, maxChunk: Int(split % 32) + 1))
    require(wholeResult.items == chunkedResult.items, "items depend on the split")
    require(wholeResult.error == chunkedResult.error, "the error depends on the split")
    for item in wholeResult.items {
        guard case .event(let event) = item else { continue }
        require(event.workspaceID.utf8.count == 36, "workspace id \(event.workspaceID)")
        if let owner = event.ownerID {
            require(owner.utf8.count == 36 && owner != "00000000-0000-0000-0000-000000000000", "owner \(owner)")
        }
    }
    // Pings alone.
    var pings = ReinitStreamParser()
    let count = Int(split % 8)
    let pingBytes = Array(String(repeating: "event: ping\n\n", count: count).utf8)
    require((try? pings.feed(pingBytes)) == Array(repeating: .ping, count: count), "pings misread")
    return 0
}

private func feed(_ parser: inout ReinitStreamParser, _ chunks: [[UInt8]]) -> (items: [ReinitStreamParser.Item], error: ReinitStreamParser.Failure?) {
    var items: [ReinitStreamParser.Item] = []
    // An empty feed at the end surfaces a failure held back behind items.
    for chunk in chunks + [[]] {
        do {
            items += try parser.feed(chunk)
        } catch {
            return (items, error)
        }
    }
    return (items, nil)
}

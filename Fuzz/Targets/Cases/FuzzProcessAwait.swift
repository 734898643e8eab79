import AgentProc
import LineRegex

/// The process API's await inputs. The first byte picks the case:
/// - an `until=` pattern and a line (LineRegex: any pattern compiles or is refused with a
///   message; matching is linear, deterministic, and agrees with a byte search for escaped
///   literals — LineRegexFuzzing checks these);
/// - an output query string (`until`, `until_literal`, `port`, `from`, `timeout`, `offset`,
///   `limit`): accepted or a 400, never a trap;
/// - output in chunks with a literal to await: the first matching line's offset equals a
///   model's (lines split at `\n`, a trailing `\r` ignored), however the output is cut into
///   chunks and however much of it is read back before the live part;
/// - a state directory an earlier agent left or a disk corrupted (a spool's cursor, valid or
///   raw, its segment files, the records log): restored without a trap, the kept range
///   consistent (`dropped` ≤ `end`), at most that range read back, and the head/tail answer
///   rebuilt from it counting no more than the output's end.
public func fuzzProcessAwait(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 4 {
    case 0:
        LineRegexFuzzing.fuzz(input.rest())
    case 1:
        _ = ProcessFuzzing.outputQueryAccepted(String(decoding: input.rest(), as: UTF8.self))
    case 2:
        watch(&input)
    default:
        restore(&input)
    }
    return 0
}

private func watch(_ input: inout FuzzInput) {
    let literal = input.data(maxLength: 4).filter { $0 != UInt8(ascii: "\n") }
    guard !literal.isEmpty else { return }
    var chunks: [[UInt8]] = []
    for _ in 0..<Int(input.byte() % 12) { chunks.append(input.data(maxLength: 40)) }
    let caughtUp = Int(input.byte()) % (chunks.count + 1)
    let all = chunks.flatMap { $0 }
    // The model: the first line (the last one may lack its newline) that holds the literal.
    var expected: UInt64?
    var start = 0
    while start <= all.count, expected == nil {
        let end = all[start...].firstIndex(of: UInt8(ascii: "\n")) ?? all.count
        var line = Array(all[start..<end])
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        if contains(line, literal) { expected = UInt64(start) }
        if end == all.count { break }
        start = end + 1
    }
    let found = ProcessFuzzing.literalMatchOffset(literal, chunks: chunks, caughtUp: caughtUp)
    require(found == expected, "await matched at \(String(describing: found)), the model at \(String(describing: expected))")
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    for i in 0...(haystack.count - needle.count) where Array(haystack[i..<(i + needle.count)]) == needle { return true }
    return false
}

private func restore(_ input: inout FuzzInput) {
    let segmentBytes = 1 + Int(input.byte() % 64)
    let readLimit = 1 + Int(input.byte() % 200)
    let dropped = input.uint(2)
    let end = dropped + input.uint(2)
    let rawCursor: [UInt8]? = input.byte() % 4 == 0 ? input.data(maxLength: 40) : nil
    var segments: [(name: String, bytes: [UInt8])] = []
    for _ in 0..<Int(input.byte() % 6) {
        // Mostly segment names (16 hex digits of a start offset), sometimes anything.
        let name: String
        if input.byte() % 5 == 0 {
            name = String(decoding: input.data(maxLength: 20), as: UTF8.self)
        } else {
            let hex = String(input.uint(2), radix: 16)
            name = String(repeating: "0", count: 16 - hex.count) + hex
        }
        segments.append((name, input.data(maxLength: 96)))
    }
    let log = input.rest()
    let state = ProcessFuzzing.restore(
        dropped: dropped, end: end, rawCursor: rawCursor, segments: segments, processLog: log,
        segmentBytes: segmentBytes, readLimit: readLimit)
    if let dropped = state.dropped, let end = state.end {
        require(dropped <= end, "a restored spool keeps [\(dropped), \(end))")
        require(UInt64(state.readBack.count) <= end - dropped, "more read back than the spool keeps")
        if let total = state.headTailTotal { require(UInt64(total) <= end, "the head/tail counts past the end") }
    }
}

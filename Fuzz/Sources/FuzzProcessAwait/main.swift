import AgentProc
import FuzzSupport
import LineRegex

/// The process API's await inputs. The first byte picks the case:
/// - an `until=` pattern and a line (LineRegex: any pattern compiles or is refused with a
///   message; matching is linear, deterministic, and agrees with a byte search for escaped
///   literals — LineRegexFuzzing checks these);
/// - an output query string (`until`, `until_literal`, `port`, `from`, `timeout`, `offset`,
///   `limit`): accepted or a 400, never a trap;
/// - output in chunks with a literal to await: the first matching line's offset equals a
///   model's (lines split at `\n`, a trailing `\r` ignored), however the output is cut into
///   chunks and however much of it is read back before the live part.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProcessAwait(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 3 {
    case 0:
        LineRegexFuzzing.fuzz(input.rest())
    case 1:
        _ = ProcessFuzzing.outputQueryAccepted(String(decoding: input.rest(), as: UTF8.self))
    default:
        watch(&input)
    }
    return 0
}

func watch(_ input: inout FuzzInput) {
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

func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    for i in 0...(haystack.count - needle.count) where Array(haystack[i..<(i + needle.count)]) == needle { return true }
    return false
}

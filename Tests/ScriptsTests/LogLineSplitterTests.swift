import Testing

@testable import Scripts
import AgentTestSupport

private struct Out: Equatable, CustomStringConvertible {
    let bytes: [UInt8]
    let truncated: Bool
    var description: String { "\(String(decoding: bytes, as: UTF8.self).debugDescription)\(truncated ? "[T]" : "")" }
}

/// The rules applied to the whole input at once (independent of chunking).
private func model(_ input: [UInt8], max: Int) -> [Out] {
    var lines: [[UInt8]] = []
    var current: [UInt8] = []
    for byte in input {
        if byte == 0x0A {
            if current.last == 0x0D { current.removeLast() }
            lines.append(current)
            current = []
        } else {
            current.append(byte)
        }
    }
    if !current.isEmpty { lines.append(current) }
    return lines.map { line in
        guard line.count > max else { return Out(bytes: line, truncated: false) }
        let cut = LogLineSplitter.characterBoundary(line, atMost: max)
        return Out(bytes: Array(line[0..<cut]) + LogLineSplitter.truncationSuffix, truncated: true)
    }
}

private func split(_ chunks: [[UInt8]], max: Int = LogLineSplitter.defaultMaxLineBytes) -> (lines: [Out], truncated: Int) {
    var splitter = LogLineSplitter(maxLineBytes: max)
    var lines: [Out] = []
    for chunk in chunks {
        splitter.feed(chunk) { lines.append(Out(bytes: Array($0.bytes), truncated: $0.truncated)) }
    }
    splitter.finish { lines.append(Out(bytes: Array($0.bytes), truncated: $0.truncated)) }
    return (lines, splitter.truncatedLines)
}

private func texts(_ lines: [Out]) -> [String] { lines.map { String(decoding: $0.bytes, as: UTF8.self) } }

@Suite(.ownThreads) struct LogLineSplitterTests {
    @Test func basicRules() {
        #expect(texts(split([bytes("a\nb\r\nc")]).lines) == ["a", "b", "c"])
        #expect(texts(split([bytes("a\rb\n")]).lines) == ["a\rb"])
        #expect(texts(split([bytes("x\r\r\n")]).lines) == ["x\r"])
        #expect(texts(split([bytes("\n\n\r\n")]).lines) == ["", "", ""])
        #expect(texts(split([bytes("tail\r")]).lines) == ["tail\r"])
        #expect(split([bytes("")]).lines.isEmpty)
        #expect(split([]).lines.isEmpty)
        #expect(texts(split([bytes("a\n")]).lines) == ["a"])
    }

    @Test func crSplitFromLFAcrossChunks() {
        #expect(texts(split([bytes("abc\r"), bytes("\ndef\r"), bytes("\n")]).lines) == ["abc", "def"])
        #expect(texts(split([bytes("\r"), bytes("\n")]).lines) == [""])
    }

    @Test func everyChunkBoundary() {
        let inputs = [
            "one\r\ntwo\n\nthree\rfour\r\n\r\nlast\r",
            "\r\n\r\r\n\n\rx",
            "héllo wörld 😀\r\nsecond\n",
            "no newline at all",
        ]
        for input in inputs.map(bytes) {
            let expected = model(input, max: 64)
            #expect(split([input]).lines == expected)
            for cut in 0...input.count {
                #expect(split([Array(input[0..<cut]), Array(input[cut...])]).lines == expected, "cut at \(cut)")
                for second in cut...input.count {
                    let chunks = [Array(input[0..<cut]), Array(input[cut..<second]), Array(input[second...])]
                    #expect(split(chunks).lines == expected)
                }
            }
            #expect(split(input.map { [$0] }).lines == expected)
        }
    }

    @Test func capAtMaxLineBytes() {
        let max = LogLineSplitter.defaultMaxLineBytes
        let long = [UInt8](repeating: 0x61, count: 100 * 1024)
        let input = long + bytes("\nnext\n")
        let expected = [Out(bytes: Array(long[0..<max]) + LogLineSplitter.truncationSuffix, truncated: true), Out(bytes: bytes("next"), truncated: false)]
        let whole = split([input])
        #expect(whole.lines == expected)
        #expect(whole.truncated == 1)
        for size in [1000, 4096, 65535, 65536, 65537, 70000] {
            let chunks = stride(from: 0, to: input.count, by: size).map { Array(input[$0..<min($0 + size, input.count)]) }
            let result = split(chunks)
            #expect(result.lines == expected, "chunks of \(size)")
            #expect(result.truncated == 1)
        }
        // Exactly at the limit, with CRLF: not truncated, in one chunk or split before the CR.
        let exact = [UInt8](repeating: 0x62, count: max)
        #expect(split([exact + bytes("\r\n")]).lines == [Out(bytes: exact, truncated: false)])
        #expect(split([exact, bytes("\r"), bytes("\n")]).lines == [Out(bytes: exact, truncated: false)])
        #expect(split([exact]).lines == [Out(bytes: exact, truncated: false)])
        // One over: truncated (with or without a chunk boundary).
        let over = exact + [0x62]
        #expect(split([over + bytes("\n")]).truncated == 1)
        #expect(split([over, bytes("\n")]).truncated == 1)
        #expect(split([over]).truncated == 1)  // the tail too
        // A tail that overflows.
        #expect(split([long]).lines == [expected[0]])
    }

    @Test func truncationKeepsCharacters() {
        // 9 bytes max: "aaaaaaaa" + "é" would split the é; it is cut before it.
        let line = bytes("aaaaaaaaé and more")
        let result = split([line + bytes("\n")], max: 9)
        #expect(result.lines == [Out(bytes: bytes("aaaaaaaa") + LogLineSplitter.truncationSuffix, truncated: true)])
        #expect(LogLineSplitter.characterBoundary(bytes("ab😀"), atMost: 5) == 2)
        #expect(LogLineSplitter.characterBoundary(bytes("ab😀"), atMost: 6) == 6)
        #expect(LogLineSplitter.characterBoundary(bytes("abc"), atMost: 2) == 2)
        #expect(LogLineSplitter.characterBoundary([0x80, 0x80, 0x80, 0x80, 0x80], atMost: 5) == 5)
    }

    @Test func randomAgainstModel() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [0x0A, 0x0D, 0x61, 0x62, 0xC3, 0xA9]
        for _ in 0..<300 {
            let input = (0..<Int.random(in: 0...80, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            var chunks: [[UInt8]] = []
            var at = 0
            while at < input.count {
                let size = Int.random(in: 1...12, using: &generator)
                chunks.append(Array(input[at..<min(at + size, input.count)]))
                at += size
            }
            #expect(split(chunks, max: 8).lines == model(input, max: 8))
        }
    }
}

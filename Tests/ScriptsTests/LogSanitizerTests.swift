import Testing

@testable import Scripts
import AgentTestSupport

/// An independent model: the standard library's UTF-8 decoder (maximal-subpart errors),
/// consecutive errors collapsed into one ❌, NUL to ❌.
private func model(_ input: [UInt8]) -> String {
    var iterator = input.makeIterator()
    var decoder = UTF8()
    var output = ""
    var lastWasError = false
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue(let scalar):
            output.unicodeScalars.append(scalar == "\0" ? "❌" : scalar)
            lastWasError = false
        case .error:
            if !lastWasError { output += "❌" }
            lastWasError = true
        case .emptyInput:
            return output
        }
    }
}

private let goCases: [([UInt8], String)] = [
    ([UInt8](), ""),
    (bytes("abc"), "abc"),
    ([0xEF, 0xB7, 0x9D], String(decoding: [0xEF, 0xB7, 0x9D] as [UInt8], as: UTF8.self)),
    ([0x61, 0xFF, 0x62], "a❌b"),
    ([0x61, 0xFF, 0x62] + bytes("\u{FFFD}"), "a❌b\u{FFFD}"),
    (bytes("a☺") + [0xFF] + bytes("b☺") + [0xC0, 0xAF] + bytes("c☺") + [0xFF], "a☺❌b☺❌c☺❌"),
    ([0xC0, 0xAF], "❌"),
    ([0xE0, 0x80, 0xAF], "❌"),
    ([0xED, 0xA0, 0x80], "❌"),
    ([0xED, 0xBF, 0xBF], "❌"),
    ([0xF0, 0x80, 0x80, 0xAF], "❌"),
    ([0xF8, 0x80, 0x80, 0x80, 0xAF], "❌"),
    ([0xFC, 0x80, 0x80, 0x80, 0x80, 0xAF], "❌"),
    ([0xFF, 0xFE], "❌"),
    (bytes("abc") + [0xE2, 0x82], "abc❌"),
    ([0xF0, 0x9F, 0x98], "❌"),
    ([0xF4, 0x90, 0x80, 0x80], "❌"),
    (bytes("a\0b"), "a❌b"),
    ([0, 0], "❌❌"),
    ([0xFF, 0, 0xFF], "❌❌❌"),
    ([0xE2, 0x82, 0xE2, 0x82, 0xAC], "❌€"),
    (bytes("😀 héllo €"), "😀 héllo €"),
    (bytes("❌"), "❌"),
]

@Suite(.ownThreads) struct LogSanitizerTests {
    @Test(arguments: goCases)
    func goEquivalent(input: [UInt8], expected: String) {
        #expect(LogSanitizer.sanitize(input) == expected)
        #expect(model(input) == expected)
    }

    @Test func randomAgainstModel() {
        var generator = SystemRandomNumberGenerator()
        let interesting: [UInt8] = [0, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF]
        for _ in 0..<20_000 {
            let input = (0..<Int.random(in: 0...12, using: &generator)).map { _ in
                Bool.random(using: &generator) ? interesting.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
            }
            #expect(LogSanitizer.sanitize(input) == model(input), "\(input)")
        }
    }
}

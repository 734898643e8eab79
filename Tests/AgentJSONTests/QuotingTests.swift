import AgentJSON
import Foundation
import Testing

/// Go's `%q` and `encoding/json`'s string literals, for the strings the agent quotes.
struct QuotingTests {
    @Test func goAndJSONQuoting() {
        #expect(goQuote("a\"b\\c\n\u{01}\u{7f}<") == #""a\"b\\c\n\x01\x7f<""#)
        #expect(jsonQuote("<a&b>\u{01}") == #""<a&b>\u0001""#, "HTML characters stay unless asked")
        #expect(jsonQuote("<a&b>\u{2028}", escapingHTML: true) == #""\u003ca\u0026b\u003e\u2028""#)
    }

    @Test func goQuoteKeepsPrintableTextAndEscapesControlBytes() {
        #expect(goQuote("") == #""""#)
        #expect(goQuote("plain text") == #""plain text""#)
        #expect(goQuote("tab\there\r") == #""tab\there\r""#)
        #expect(goQuote("\u{1b}[0m") == #""\x1b[0m""#)
        #expect(goQuote("é ✓ 😀") == "\"é ✓ 😀\"")
        #expect(goQuote("'single'") == #""'single'""#)
    }

    @Test func jsonQuoteEscapesWhatGoEscapes() {
        #expect(jsonQuote("") == #""""#)
        #expect(jsonQuote("a\"b\\c\n\r\t") == #""a\"b\\c\n\r\t""#)
        #expect(jsonQuote("\u{00}\u{1f}") == #""\u0000\u001f""#)
        #expect(jsonQuote("é/😀\u{7f}") == "\"é/😀\u{7f}\"", "no escape for slash, DEL or non-ASCII")
        #expect(jsonQuote("<>&\u{2029}", escapingHTML: true) == #""\u003c\u003e\u0026\u2029""#)
    }

    @Test func zeroPaddedAsPrintfPadsIt() {
        #expect(zeroPadded(0x1f, width: 4, radix: 16) == "001f")
        #expect(zeroPadded(0xab, width: 4, radix: 16, uppercase: true) == "00AB")
        #expect(zeroPadded(7, width: 3) == "007")
        #expect(zeroPadded(12345, width: 2) == "12345", "never cut")
        #expect(zeroPadded(0, width: 0) == "0")
    }

    /// What `String(format:)` gives.
    @Test func zeroPaddingMatchesFormat() {
        for value in [0, 7, 255, 4095, 65535, 123_456] {
            #expect(zeroPadded(value, width: 4, radix: 16, uppercase: true) == String(format: "%04X", value))
            #expect(zeroPadded(value, width: 12) == String(format: "%012d", value))
            #expect(zeroPadded(UInt32(value), width: 2, radix: 16) == String(format: "%02x", value))
        }
    }
}

import Testing

@testable import OutboundProxy

@Suite(.timeLimit(.minutes(1)))
struct ProxyConnectAnswerTests {
    @Test func twoHundredInPiecesKeepsTheBytesAfterTheHead() {
        var answer = ProxyConnectAnswer()
        let text = Array("HTTP/1.1 200 Connection established\r\nProxy-Agent: test\r\n\r\nSSH-2.0".utf8)
        // Every split point: the blank line may straddle two reads.
        for split in 1..<text.count {
            answer = ProxyConnectAnswer()
            // Once established the caller passes later bytes on itself.
            let outcome: ProxyConnectAnswer.Outcome
            switch answer.feed(text[..<split]) {
            case .incomplete: outcome = answer.feed(text[split...])
            case .established(let rest): outcome = .established(rest: rest + text[split...])
            case let other: outcome = other
            }
            #expect(outcome == .established(rest: Array("SSH-2.0".utf8)), "split at \(split)")
        }
    }

    /// A head ending at the size bound is taken, or refused, the same in one read as in many.
    @Test func theBoundDoesNotDependOnTheSplit() {
        for total in (ProxyConnectAnswer.maxHeadBytes - 2)...(ProxyConnectAnswer.maxHeadBytes + 6) {
            let line = "HTTP/1.1 200 OK\r\nX: "
            let text = Array((line + String(repeating: "a", count: total - line.utf8.count - 4) + "\r\n\r\n").utf8)
            var whole = ProxyConnectAnswer()
            let once = whole.feed(text)
            // Two reads, the first just past the bound, before the blank line.
            var pieces = ProxyConnectAnswer()
            let split = min(ProxyConnectAnswer.maxHeadBytes + 1, text.count - 1)
            var outcome = pieces.feed(text[..<split])
            if outcome == .incomplete { outcome = pieces.feed(text[split...]) }
            #expect(once == outcome, "\(total) bytes")
        }
    }

    @Test func anyOtherStatusIsARefusalWithItsReason() {
        var answer = ProxyConnectAnswer()
        #expect(answer.feed(Array("HTTP/1.0 407 Proxy Authentication Required\r\n\r\n".utf8)) == .refused(status: 407, reason: "Proxy Authentication Required"))
        answer = ProxyConnectAnswer()
        #expect(answer.feed(Array("HTTP/1.1 204\n\n".utf8)) == .refused(status: 204, reason: ""))
        answer = ProxyConnectAnswer()
        #expect(answer.feed(Array("HTTP/1.1 403 No\u{1}pe\r\n\r\n".utf8)) == .refused(status: 403, reason: "No?pe"))
    }

    @Test func notHTTPOrTooLongIsMalformed() {
        var answer = ProxyConnectAnswer()
        #expect(answer.feed(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)) == .malformed("a status line that is not HTTP/1.x"))
        answer = ProxyConnectAnswer()
        #expect(answer.feed(Array("HTTP/1.1 2000 OK\r\n\r\n".utf8)) == .malformed("a status line that is not HTTP/1.x"))
        answer = ProxyConnectAnswer()
        var outcome = answer.feed(Array("HTTP/1.1 200 OK\r\n".utf8))
        var rounds = 0
        while outcome == .incomplete, rounds < 100 {
            outcome = answer.feed(Array(repeating: UInt8(ascii: "a"), count: 1024))
            rounds += 1
        }
        #expect(outcome == .malformed("an answer head over \(ProxyConnectAnswer.maxHeadBytes) bytes"))
        #expect(rounds == ProxyConnectAnswer.maxHeadBytes / 1024)
    }
}

import AgentCore
@testable import AgentSpeedtest
import Testing

/// The request line and the answers, byte for byte as tailscale's Go server gives them.
struct SpeedtestRequestTests {
    func answer(_ text: String) -> SpeedtestRequest.Answer {
        SpeedtestRequest.answer(Array(text.utf8))
    }

    @Test func aVersionTwoRequestStartsTheTestInTheClientsDirection() {
        #expect(answer(#"{"version":2,"time":5000000000,"direction":0}"#) == .start(.init(duration: .seconds(5), direction: .download)))
        #expect(answer(#"{"version":2,"time":1000000,"direction":1}"#) == .start(.init(duration: .milliseconds(1), direction: .upload)))
        // Keys match case-insensitively, the last one wins, unknown keys are ignored, and any
        // direction other than 1 has the agent write (as the reference's Reverse does).
        #expect(
            answer(#"{"VERSION":2,"Time":7,"time":9,"direction":5,"extra":[1,{"a":"}"}]}"#)
                == .start(.init(duration: .nanoseconds(9), direction: .download)))
        #expect(SpeedtestRequest.Answer.start(.init(duration: .zero, direction: .upload)).bytes == Array("{}\n".utf8))
    }

    @Test func theDurationIsCappedAndNeverNegative() {
        #expect(
            answer(#"{"version":2,"time":3600000000000,"direction":0}"#)
                == .start(.init(duration: SpeedtestRequest.maxDuration, direction: .download)))
        #expect(answer(#"{"version":2,"time":-5,"direction":1}"#) == .start(.init(duration: .zero, direction: .upload)))
    }

    /// A fuzz finding: an error before the input runs out is the syntax error, not
    /// `unexpected EOF` (only input that stops mid-value is), whatever follows.
    @Test func aSyntaxErrorBeforeTheEndIsNotUnexpectedEOF() {
        let early = answer("ttt")
        #expect(early == answer("ttt {\"version\":1}"))
        guard case .refuse(let text) = early else { Issue.record("\(early)"); return }
        #expect(text != "unexpected EOF", "\(text)")
        #expect(answer(#"{"version":2"#) == .refuse("unexpected EOF"))
    }

    @Test func errorsAreTheReferencesTexts() {
        #expect(
            answer(#"{"version":1,"time":5,"direction":0}"#)
                == .refuse("version mismatch! Server is version 2, client is version 1"))
        #expect(answer("null") == .refuse("version mismatch! Server is version 2, client is version 0"))
        #expect(answer(#"{"time":5}"#) == .refuse("version mismatch! Server is version 2, client is version 0"))
        #expect(answer(#"{"version":"2"}"#) == .refuse("json: cannot unmarshal string into Go struct field config.version of type int"))
        #expect(
            answer(#"{"version":2,"time":1.5}"#)
                == .refuse("json: cannot unmarshal number 1.5 into Go struct field config.time of type time.Duration"))
        #expect(answer("[1]") == .refuse("json: cannot unmarshal array into Go value of type speedtest.config"))
        #expect(answer("x") == .refuse("invalid character 'x' looking for beginning of value"))
        #expect(answer(#"{"version":2"#) == .refuse("unexpected EOF"))
        #expect(answer("  ") == .refuse("EOF"))
        // Go's encoder escapes HTML characters and ends the line.
        #expect(SpeedtestRequest.Answer.refuse("a<b & \"c\"").bytes == Array(#"{"error":"a\u003cb \u0026 \"c\""}"#.utf8) + [0x0a])
    }

    @Test func theValueEndsWhereGosDecoderWouldStop() {
        func end(_ text: String) -> Int? { SpeedtestRequest.end(of: Array(text.utf8)) }
        #expect(end(#"  {"a":"}\"{","b":[{}]}xyz"#) == 23)
        #expect(end(#"{"version":2"#) == nil)
        #expect(end("\"str\" ") == 5)
        #expect(end("12") == nil)
        #expect(end("12\n") == 2)
        #expect(end("true}") == 4)
        #expect(end("x") == 1)
        #expect(end("") == nil)
        #expect(end(" \n") == nil)
    }
}

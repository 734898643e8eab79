import AgentCore
import Testing

/// Durations as Go's `time.ParseDuration` reads them, up to its limits exactly.
struct GoDurationTests {
    @Test(arguments: [
        ("5m", Duration.seconds(300)), ("1h30m", .seconds(5400)), ("1.5s", .milliseconds(1500)), ("0", .zero),
        ("-1s", .seconds(-1)), ("+2ms", .milliseconds(2)), (".5s", .milliseconds(500)), ("1.s", .seconds(1)),
        ("1us", .microseconds(1)), ("1µs", .microseconds(1)), ("2562046h", .seconds(2_562_046 * 3600)),
        ("9223372036854775807ns", .nanoseconds(Int64.max)), ("2562047h47m16.854775807s", .nanoseconds(Int64.max)),
        ("-9223372036854775808ns", .nanoseconds(Int64.min)), ("9223372036s", .seconds(9_223_372_036)),
    ])
    func valid(text: String, expected: Duration) throws {
        #expect(try GoDuration.parse(text) == expected)
    }

    @Test(arguments: [
        ("", "time: invalid duration \"\""), ("-", "time: invalid duration \"-\""), ("5", "time: missing unit in duration \"5\""),
        ("5x", "time: unknown unit \"x\" in duration \"5x\""), (".s", "time: invalid duration \".s\""),
        ("9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\""),
        ("2562047h47m16.854775808s", "time: invalid duration \"2562047h47m16.854775808s\""),
        ("2562048h", "time: invalid duration \"2562048h\""),
    ])
    func invalid(text: String, message: String) {
        #expect(throws: GoDuration.Invalid.self) { try GoDuration.parse(text) }
        do {
            _ = try GoDuration.parse(text)
        } catch {
            #expect(error.description == message)
        }
    }
}
